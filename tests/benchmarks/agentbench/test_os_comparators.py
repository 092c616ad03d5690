"""The pure parts of grading: upstream's five comparators, match, the grading rule and how output is shown."""

from __future__ import annotations

import pytest

from ecdysis.benchmarks.agentbench.os_interaction.comparators import (
    containing,
    in_,
    integer_match,
    match,
    size_match,
    string_match,
)
from ecdysis.benchmarks.agentbench.os_interaction.grading import evaluate
from ecdysis.benchmarks.agentbench.os_interaction.shell import encode_command
from ecdysis.benchmarks.agentbench.os_interaction.tasks import Match, OSGold, Script
from ecdysis.benchmarks.agentbench.os_interaction.tools import TRUNCATED_NOTE, format_output, tool_schemas


@pytest.mark.parametrize(("answer", "expected", "ok"), [
    ("3", "3\n", True), (" 3 ", "3", True), ("+3", "3", True), ("03", "3", True), ("1_000", "1000", True),
    ("3.0", "3", False), ("three", "3", False), ("", "0", False), ("4", "3", False), ("3", "", False),
])
def test_integer_match(answer: str, expected: str, ok: bool) -> None:
    assert integer_match(answer, expected) is ok


@pytest.mark.parametrize(("answer", "expected", "ok"), [
    ("/tmp/a", "/tmp/a\n", True), ("a\r\nb", "a\nb", True), ("a\rb", "a\nb\n", True), ("  x ", "x", True),
    ("A", "a", False), ("a b", "a  b", False), ("", "", True),
])
def test_string_match(answer: str, expected: str, ok: bool) -> None:
    assert string_match(answer, expected) is ok


@pytest.mark.parametrize(("answer", "expected", "ok"), [
    ("251M", "251M\n", True), ("1024", "1K", True), ("2G", "2048M", True), ("5 Byte", "5", True),
    ("1P", str(1024**5), True), ("12T", "12T", True),
    ("12KB", "12KB", False),  # "B" is tried first: "12K" is left, which is no integer (as upstream)
    ("4.0K", "4.0K", False),  # du -h style decimals never parse (as upstream)
    ("1M", "1000K", False), ("big", "big", False),
])
def test_size_match(answer: str, expected: str, ok: bool) -> None:
    assert size_match(answer, expected) is ok


def test_containing_and_in() -> None:
    assert containing("the answer is 42\n", "42")
    assert not containing("4", "42")
    assert containing("anything", "\n")  # an empty expected output is in every answer
    assert in_("42", "the answer is 42\r\n")
    assert not in_("43", "the answer is 42")
    assert in_("x\r\n", "x\ny")


def test_match() -> None:
    assert match(" love\n", expected="love", strip=True)
    assert not match(" love\n", expected="love", strip=False)
    assert not match(None, expected="love", strip=True)
    assert match("abc123", regex=r"\d+")
    assert not match("abc", regex=r"\d+")
    assert not match("abc", regex=r"(")  # a broken pattern fails the answer rather than the grader
    assert not match("abc")


def _runner(outputs: dict[str, tuple[int | None, str]], seen: list[list[str]]):  # type: ignore[no-untyped-def]
    def run(script: Script, params: list[str]) -> tuple[int | None, str]:
        seen.append(params)
        return outputs[script.code or ""]
    return run


def test_evaluate_runs_the_example_then_compares_on_the_host() -> None:
    gold = OSGold(check=[None, Script(language="python", file="check/integer-match.py")],
                  example=Script(code="wc -l < f"))
    seen: list[list[str]] = []
    assert evaluate(gold, "7", _runner({"wc -l < f": (0, "7\n")}, seen)) == (True, "every check passed")
    assert seen == [["7"]]  # the example gets the answer as $1, as upstream passes it
    ok, why = evaluate(gold, "8", _runner({"wc -l < f": (0, "7\n")}, []))
    assert not ok and "integer" in why
    ok, why = evaluate(gold, "7", _runner({"wc -l < f": (None, "")}, []))
    assert not ok and "time limit" in why
    ok, why = evaluate(gold, None, _runner({"wc -l < f": (0, "7\n")}, []))
    assert not ok


def test_evaluate_chains_record_scripts_with_earlier_outputs() -> None:
    gold = OSGold(check=[Script(code="first"), Script(language="python", code="second")])
    seen: list[list[str]] = []
    assert evaluate(gold, "ans", _runner({"first": (0, "out1"), "second": (0, "")}, seen))[0]
    assert seen == [["ans"], ["ans", "out1"]]
    ok, why = evaluate(gold, "ans", _runner({"first": (1, ""), "second": (0, "")}, []))
    assert not ok and why == "check 1 failed (exit status 1)"


def test_evaluate_match_needs_no_container() -> None:
    gold = OSGold(match=Match(answer="yes", strip=True))
    assert evaluate(gold, "yes\n", _runner({}, []))[0]
    assert not evaluate(gold, "no", _runner({}, []))[0]


def test_output_is_shown_and_cut_as_upstream_does() -> None:
    assert format_output(b"") == "The output of the OS is empty."
    assert format_output(b"hi\n") == "The output of the OS:\n\nhi\n"
    assert format_output(b"\x1b[01;34mdir\x1b[0m\x07") == "The output of the OS:\n\ndir"
    long = format_output(b"x" * 801)
    assert long == "The output of the OS:\n\n" + "x" * 780 + TRUNCATED_NOTE
    assert format_output(b"x" * 800) == "The output of the OS:\n\n" + "x" * 800
    assert format_output(b"\xff\xfe") == "The output of the OS:\n\nOS Environment output cannot be decoded as UTF-8"
    assert format_output("é".encode() * 1000 + b"\xc3", cut=True).endswith("é" * 290 + TRUNCATED_NOTE)


def test_tools_mirror_upstreams_function_calling_variant() -> None:
    schemas = tool_schemas()
    names = [schema["function"]["name"] for schema in schemas]
    assert names == ["bash_action", "finish_action", "answer_action"]
    parameters = {schema["function"]["name"]: schema["function"]["parameters"] for schema in schemas}
    assert parameters["bash_action"]["required"] == ["script"]
    assert parameters["answer_action"]["required"] == ["answer"]
    assert parameters["finish_action"]["required"] == ["thought"]
    schemas[0]["function"]["name"] = "changed"
    assert tool_schemas()[0]["function"]["name"] == "bash_action"


def test_commands_are_sent_as_one_escaped_line() -> None:
    line = encode_command("echo '50%' \\n\nprintf \"%s\" é")
    assert line.count(b"\n") == 1 and line.endswith(b"')\"\n")
    assert b"%" not in line.split(b"'", 1)[1] and b"\\045" in line
    assert b"\\012" in line and b"\\047" in line and b"\\303\\251" in line
