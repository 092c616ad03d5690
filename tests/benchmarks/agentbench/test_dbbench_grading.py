"""Upstream's answer matching for SELECT-like DBBench tasks (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.dbbench.grading import (
    answer_values,
    answers_match,
    normalize_value,
    table_hash_query,
)


@pytest.mark.parametrize(("answer", "label"), [
    (["5"], ["5.0"]),
    (["5.004"], ["5"]),
    (["1,234"], ["1234"]),
    (["50%"], ["50"]),
    (["'Vienna'"], ["Vienna"]),
    ([" Vienna "], ["Vienna"]),
    (["None"], ["0"]),
    ([None], ["none"]),
    (["NaN"], ["null"]),
    (["a", "b"], ["b", "a"]),
    (["a", "a", "b"], ["a", "b"]),  # sets, as upstream
    (["1", "2"], ["2.001", "1"]),  # numbers pair up within 0.01 in any order
    ([5], ["5"]),
    ([("5",)], ["5"]),
    ("[(5,)]", ["5"]),  # a raw query result as a string
    ("[('a',), ('b',)]", ["a", "b"]),
    ("['a', 'b']", ["b", "a"]),
    ("[a, 'b, c']", ["a", "b, c"]),  # not a literal: upstream's hand-split, quotes dropped
    ("Dallas", ["Dallas"]),
    (7, ["7"]),
    (None, ["0"]),
])
def test_matches(answer: object, label: list[str]) -> None:
    assert answers_match(answer, label)


@pytest.mark.parametrize(("answer", "label"), [
    (["5.02"], ["5"]),
    (["dallas"], ["Dallas"]),
    (["a"], ["a", "b"]),
    (["1", "1"], ["1", "2"]),
    (["1", "2", "3"], ["1", "2"]),
    (["x"], ["0"]),
    ("[1][0]", ["1"]),  # not a list once parsed: upstream compares nothing
    ([], ["1"]),
    (["[(5,)]"], ["5"]),  # a result string inside the list is a plain value
])
def test_mismatches(answer: object, label: list[str]) -> None:
    assert not answers_match(answer, label)


def test_strings_are_never_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = f"[__import__('pathlib').Path({str(marker)!r}).touch()]"
    answers_match(payload, ["x"])
    answers_match([payload], ["x"])
    assert not marker.exists()
    assert answer_values("[1+1]") == ["1+1"]  # upstream's eval would give 2: not a literal here, so hand-split


def test_normalize_value() -> None:
    assert normalize_value(" 12.5% ") == "12.5"
    assert normalize_value("1,000,000") == "1000000"
    assert normalize_value("[1,2]") == "[1,2]"
    assert normalize_value("Infinity") == "0"
    assert normalize_value("") == "0"
    assert normalize_value("Null") == "0"
    assert normalize_value("Text") == "Text"


def test_table_hash_query_is_upstreams() -> None:
    assert table_hash_query("t`x", ["a", "b c"], "db") == (
        "SELECT MD5(GROUP_CONCAT(rowhash ORDER BY rowhash)) AS hash FROM (SELECT SUBSTRING(MD5(CONCAT_WS(',', "
        "`a`,`b c`)), 1, 5) AS rowhash FROM `db`.`t``x`) AS sub")
