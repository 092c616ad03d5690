"""Search/replace edits of the built-in coder: exact hits, misses with the closest region, ambiguity, whitespace."""

from __future__ import annotations

import re

import pytest

from ecdysis.coders.search_replace import EditNotApplied, apply_edit, closest_region
from ecdysis.testing.evolution import marked_region

SOURCE = "".join(f"value_{i} = {i}\n" for i in range(1, 16)) + (
    "\n\ndef handle_refund(order_id, amount):\n"
    "    if amount <= 0:\n"
    "        return None\n"
    "    return {'order': order_id, 'amount': amount}\n"
) + "".join(f"other_{i} = {i}\n" for i in range(1, 11))
REFUND_LINE = SOURCE.splitlines().index("def handle_refund(order_id, amount):") + 1


def _miss(text: str, search: str) -> str:
    with pytest.raises(EditNotApplied) as caught:
        apply_edit(text, search, "whatever")
    return str(caught.value)


def test_an_exact_unique_match_is_replaced_and_its_lines_reported() -> None:
    outcome = apply_edit(SOURCE, "    if amount <= 0:\n        return None\n",
                         "    if amount < 0:\n        return None\n")
    assert "    if amount < 0:\n" in outcome.text and "amount <= 0" not in outcome.text
    assert (outcome.first_line, outcome.last_line) == (REFUND_LINE + 1, REFUND_LINE + 2)
    assert outcome.note == ""
    assert outcome.text.replace("amount < 0", "amount <= 0") == SOURCE  # nothing else changed


def test_a_miss_shows_the_closest_region_with_line_numbers() -> None:
    message = _miss(SOURCE, "def handle_refund(order, amount):")
    assert "occurs 0 times" in message
    assert re.search(rf"^>\s*{REFUND_LINE} \| def handle_refund\(order_id, amount\):$", message, re.M)
    assert re.search(rf"^ \s*{REFUND_LINE + 1} \|     if amount <= 0:$", message, re.M)  # context, unmarked
    assert marked_region(message) == "def handle_refund(order_id, amount):"


def test_a_multi_line_miss_marks_as_many_lines_as_were_searched() -> None:
    near = "    if amount < 0:\n        return None\n    return {'order': order_id, 'amount': amount}\n"
    message = _miss(SOURCE, near)
    assert marked_region(message) == ("    if amount <= 0:\n        return None\n"
                                      "    return {'order': order_id, 'amount': amount}")
    assert f"lines {REFUND_LINE + 1}-{REFUND_LINE + 3}" in message


def test_the_closest_region_is_found_whichever_lines_are_misquoted() -> None:
    body = ["    if amount <= 0:", "        return None", "    return {'order': order_id, 'amount': amount}"]
    last_wrong = "\n".join([*body[:2], "    return {'order': order_id, 'amt': amount}"])
    all_wrong = "    if amt <= 0:\n        return Nothing\n    return {'order': order, 'amount': amt}"
    for search in (last_wrong, all_wrong):
        message = _miss(SOURCE, search)
        assert marked_region(message) == "\n".join(body), search
        assert f"lines {REFUND_LINE + 1}-{REFUND_LINE + 3}" in message


def test_an_ambiguous_search_says_how_often_it_occurs() -> None:
    message = _miss("x = 1\ny = 2\nx = 1\nx = 1\n", "x = 1")
    assert "occurs 3 times" in message and "more surrounding lines" in message


def test_trailing_spaces_are_normalised_when_the_match_is_unique() -> None:
    text = "a = 1   \nb = 2\t\nc = 3\n"
    outcome = apply_edit(text, "a = 1\nb = 2\n", "a = 10\nb = 20\n")
    assert outcome.text == "a = 10\nb = 20\nc = 3\n"
    assert "normalising whitespace" in outcome.note and (outcome.first_line, outcome.last_line) == (1, 2)


def test_a_uniform_indentation_mismatch_is_applied_and_the_replacement_reindented() -> None:
    text = "class A:\n    def f(self):\n        if self.x:\n            return 1\n        return 2\n"
    outcome = apply_edit(text, "if self.x:\n    return 1\n", "if self.x and self.y:\n    return 1\n")
    assert outcome.text == ("class A:\n    def f(self):\n        if self.x and self.y:\n            return 1\n"
                            "        return 2\n")
    assert "indented to match" in outcome.note and (outcome.first_line, outcome.last_line) == (3, 4)
    deeper = apply_edit("def f():\n    return 1\n", "    def f():\n        return 1", "    def f():\n        return 2")
    assert deeper.text == "def f():\n    return 2\n"


def test_uneven_indentation_and_whitespace_ambiguity_are_refused() -> None:
    uneven = _miss("def f():\n    return 1\n", "def f():\n  return 1")
    assert "unevenly" in uneven and re.search(r"^ 2 \|     return 1$", uneven, re.M)
    ambiguous = _miss("if a:\n    x = 1\nif b:\n  x = 1\n", "        x = 1")
    assert "2 times when whitespace is ignored" in ambiguous


def test_an_empty_search_and_an_empty_file() -> None:
    assert "empty" in _miss("x = 1\n", "  \n")
    assert closest_region("", "x") == "The file is empty."
    assert "occurs 0 times" in _miss("", "x = 1")
