"""The answer checks of AgentBench's OS-interaction tasks, as pure functions run on the trusted side.

Upstream grades ``check: [null, {"file": "check/<name>.py"}]`` by running the task's example in the container and
then its check script with ``argv[1]`` = the agent's answer and ``argv[2]`` = the example's output; the script's exit
status is the verdict. Those five scripts are not distributed with the data; these functions have their semantics
(written from their description, not copied), including their quirks, so scores stay comparable:

* ``integer``: both sides parse as Python ``int`` (surrounding whitespace allowed) and are equal; ``"3.0"`` fails.
* ``string``: equal after normalising ``\\r\\n``/``\\r`` to ``\\n`` and stripping surrounding whitespace.
* ``size``: both sides parse as sizes and are equal. A size is an integer with an optional unit suffix; the suffixes
  are tried in the order B, Byte, K, KB, M, MB, G, GB, T, TB, P, PB (powers of 1024), the first that ends the string
  is cut off, and the rest must be an integer. So ``"12K"`` is 12288, but ``"12KB"`` ends with ``"B"`` first, leaves
  ``"12K"`` and fails, and ``"4.0K"`` (``du -h`` style) fails too: upstream behaves the same.
* ``containing``: the expected output (normalised, stripped) is a substring of the answer.
* ``in``: the answer (normalised, stripped) is a substring of the expected output.

``match`` is ``evaluation.match``: equality with the expected answer (after stripping the answer when the record
asks for it, which a plain-string ``match`` does) or a regular-expression search.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SIZE_UNITS = {
    "B": 1, "Byte": 1,
    "K": 1024, "KB": 1024,
    "M": 1024**2, "MB": 1024**2,
    "G": 1024**3, "GB": 1024**3,
    "T": 1024**4, "TB": 1024**4,
    "P": 1024**5, "PB": 1024**5,
}  # fmt: skip


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _parse_size(text: str) -> int:
    text = text.strip()
    for unit, factor in _SIZE_UNITS.items():  # in this order: see the module docstring
        if text.endswith(unit):
            return int(text[: -len(unit)]) * factor
    return int(text)


def integer_match(answer: str, expected: str) -> bool:
    """Both are integers and equal."""
    try:
        return int(answer) == int(expected)
    except ValueError:
        return False


def string_match(answer: str, expected: str) -> bool:
    """Equal after normalising newlines and stripping."""
    return _normalise(answer) == _normalise(expected)


def size_match(answer: str, expected: str) -> bool:
    """Both are sizes (see the module docstring) of the same number of bytes."""
    try:
        return _parse_size(answer) == _parse_size(expected)
    except ValueError:
        return False


def containing(answer: str, expected: str) -> bool:
    """The answer contains the expected output."""
    return _normalise(expected) in _normalise(answer)


def in_(answer: str, expected: str) -> bool:
    """The answer is part of the expected output."""
    return _normalise(answer) in _normalise(expected)


COMPARATORS: dict[str, Callable[[str, str], bool]] = {
    "integer": integer_match,
    "string": string_match,
    "size": size_match,
    "containing": containing,
    "in": in_,
}
"""Each comparator by the name ``Script.comparator`` gives."""


def match(answer: str | None, *, expected: str | None = None, regex: str | None = None, strip: bool = False) -> bool:
    """``evaluation.match``: ``answer == expected`` (``answer`` stripped first when ``strip``), else a search for
    ``regex`` in the answer. No answer never matches."""
    if answer is None:
        return False
    if strip:
        answer = answer.strip()
    if expected is not None:
        return answer == expected
    if regex is not None:
        try:
            return re.search(regex, answer) is not None
        except re.error:
            return False
    return False
