"""τ²'s ``calculate`` tool, bounded: the same answers, but no expression can hold the worker for long.

τ² evaluates ``calculate`` arguments with ``eval`` over digits, ``+-*/().`` and spaces. ``**`` is in that alphabet, so
``9**9**8`` computes a number of ~300 million digits while holding the GIL: nothing in the worker process can
interrupt it, and every episode of that worker stalls. Only powers of integers can blow up like that (sums, products
and quotients of the literals that fit in an argument stay small), so an expression without ``**`` goes to τ²'s own
tool unchanged, and one with ``**`` is evaluated here on its syntax tree, refusing any integer power whose result
would exceed :data:`MAX_BITS` bits (τ² itself would fail on it: such a number overflows the ``float`` its answer is).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

ALPHABET = frozenset("0123456789+-*/(). ")
MAX_BITS = 10_000
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def needs_guard(arguments: Any) -> bool:
    """Whether a ``calculate`` call must be evaluated here rather than by τ² (it raises to a power)."""
    return (isinstance(arguments, dict) and set(arguments) == {"expression"}
            and isinstance(arguments["expression"], str) and "**" in arguments["expression"])


def calculate(expression: str) -> str:
    """τ²'s answer for ``expression`` (the value rounded to 2 places, as text), computed within bounds."""
    if not all(char in ALPHABET for char in expression):
        raise ValueError("Invalid characters in expression")
    tree = ast.parse(expression, mode="eval")
    return str(round(float(_value(tree.body)), 2))


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _power(_value(node.left), _value(node.right))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise TypeError(f"unsupported expression: {type(node).__name__}")


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        bits = exponent * math.log2(abs(base))
        if bits > MAX_BITS:
            raise OverflowError("int too large to convert to float")
    return base**exponent
