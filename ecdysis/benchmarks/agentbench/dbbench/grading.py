"""DBBench's answer matching and table hash, reproducing upstream AgentBench's ``DBResultProcessor``.

SELECT-like tasks: the committed answer and the gold ``label`` are both turned into a list of strings
(:func:`answer_values`) and compared (:func:`answers_match`): one value each — equal as numbers within 0.01, or as
strings; several — as multisets of numbers within 0.01 when every value on both sides is a number, else as sets.
Where upstream ``eval``-s a string that looks like a list, this module uses :func:`ast.literal_eval` (the same
result for every literal; an expression that is not a literal falls back to upstream's own hand-split).

INSERT/UPDATE tasks: the md5 of the final table (:func:`table_hash_query`), compared with the stored digest.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

FLOAT_TOLERANCE = 1e-2
_SPECIAL_VALUES = frozenset({"none", "null", "undefined", "nan", "inf", "infinity", "-inf", "-infinity", ""})


class Grade(BaseModel):
    """The outcome of one episode: ``reward`` is 1.0 or 0.0."""

    reward: float
    breakdown: dict[str, float] = Field(default_factory=dict)
    note: str = ""


def quote_identifier(name: str) -> str:
    """``name`` as a MySQL identifier in backticks (upstream puts names in backticks without escaping; names in
    the data have no backtick, so the result is the same)."""
    return "`" + name.replace("`", "``") + "`"


def table_hash_query(table_name: str, columns: Sequence[str], database: str | None = None) -> str:
    """Upstream's hash of a table: the md5 of the sorted, comma-joined first five hex digits of each row's
    ``MD5(CONCAT_WS(',', <columns in task order>))``. Run it with ``group_concat_max_len`` = 1024 (MySQL 8's
    default, which upstream ran with); the result is NULL for an empty table."""
    cols = ",".join(quote_identifier(c) for c in columns)
    table = quote_identifier(table_name)
    if database is not None:
        table = f"{quote_identifier(database)}.{table}"
    return (f"SELECT MD5(GROUP_CONCAT(rowhash ORDER BY rowhash)) AS hash FROM (SELECT SUBSTRING(MD5(CONCAT_WS(',', "
            f"{cols})), 1, 5) AS rowhash FROM {table}) AS sub")


def normalize_value(value: Any) -> str:
    """One answer value as upstream normalises it: percent sign and thousands separators dropped, the empty string,
    null, none, nan, inf… mapped to ``"0"``."""
    if value is None:
        return "0"
    text = str(value).strip()
    if text.endswith("%"):
        return text[:-1].strip()
    if "," in text and not text.startswith("[") and not text.endswith("]"):
        text = text.replace(",", "")
    return "0" if text.lower() in _SPECIAL_VALUES else text


def _strip_quotes(value: Any) -> str:
    return str(value).strip().strip("'\"")


def _item_text(item: Any) -> str:
    """A list item: a one-element tuple (a result row) stands for its value."""
    if isinstance(item, tuple) and len(item) == 1:
        return _strip_quotes(item[0])
    return _strip_quotes(item)


def _literal(text: str) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _result_rows(text: str) -> list[str] | None:
    """A string holding a raw query result (``"[(v1,), (v2,)]"``) as its values (rows of one column; wider rows are
    dropped as upstream does), or ``None`` when the string is not one."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    ok, parsed = _literal(text)
    if ok and isinstance(parsed, list) and all(isinstance(item, tuple) for item in parsed):
        return [_strip_quotes(item[0]) for item in parsed if len(item) == 1]
    inner = text.strip("[]")
    if inner.count("(") == 1 and inner.startswith("(") and inner.endswith(",)"):
        return [_strip_quotes(inner[1:-2])]
    return None


def _split_list(body: str) -> list[str]:
    """Upstream's hand-split of a bracketed list that does not parse: commas outside quotes separate items,
    quote characters are dropped."""
    items: list[str] = []
    current = ""
    in_quotes = False
    for char in body:
        if char in "\"'":
            in_quotes = not in_quotes
        elif char == "," and not in_quotes:
            if current:
                items.append(normalize_value(_strip_quotes(current)))
                current = ""
        else:
            current += char
    if current:
        items.append(normalize_value(_strip_quotes(current)))
    return items


def answer_values(answer: Any) -> list[str] | None:
    """An answer (committed or gold) as the list of normalised strings upstream compares; ``None`` where upstream
    yields nothing comparable (a bracketed string that parses to something other than a list)."""
    if answer is None:
        return ["0"]
    if isinstance(answer, str):
        rows = _result_rows(answer)
        if rows is not None:
            return [normalize_value(v) for v in rows]
        text = answer.strip()
        if not (text.startswith("[") and text.endswith("]")):
            return [normalize_value(_strip_quotes(text))]
        ok, parsed = _literal(text)
        if not ok:
            return _split_list(text[1:-1])
        if isinstance(parsed, list):
            return [normalize_value(_item_text(item)) for item in parsed]
        return None
    if isinstance(answer, list | tuple):
        return [normalize_value(_item_text(item)) for item in answer]
    return [normalize_value(_strip_quotes(answer))]


def _is_number(value: str) -> bool:
    try:
        float(value)
    except (ValueError, TypeError):
        return False
    return True


def _close(a: str, b: str) -> bool:
    try:
        diff = abs(float(a) - float(b))
    except (ValueError, TypeError, OverflowError):
        return False
    return not math.isnan(diff) and diff <= FLOAT_TOLERANCE


def answers_match(answer: Any, label: Any) -> bool:
    """Whether a committed answer matches the gold ``label`` of a SELECT-like task, as upstream decides it."""
    got = answer_values(answer)
    want = answer_values(label)
    if got is None or want is None:
        return False
    if len(got) == 1 and len(want) == 1:
        a, b = got[0], want[0]
        if a == "0" and b == "0":
            return True
        if _is_number(a) and _is_number(b):
            return _close(a, b)
        return a == b
    if all(_is_number(v) for v in got) and all(_is_number(v) for v in want):
        if len(got) != len(want):
            return False
        # Greedy one-to-one pairing within the tolerance, in the order upstream pairs them.
        taken = [False] * len(want)
        for a in got:
            for i, b in enumerate(want):
                if not taken[i] and _close(a, b):
                    taken[i] = True
                    break
            else:
                return False
        return all(taken)
    return set(got) == set(want)
