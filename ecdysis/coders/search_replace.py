"""Exact search/replace edits with feedback a small model can act on.

:func:`apply_edit` replaces the one occurrence of a search text. When the text is not there, the error shows the
region of the file closest to it (line-numbered, the closest lines marked ``>``) so the model can copy the text
exactly on its next try; when it occurs several times, the error says how many and asks for more context. A search
text that differs from exactly one region of the file only in whitespace (indentation, trailing spaces) is applied
there, the replacement shifted by the same indentation, and the outcome says so.

>>> apply_edit("a = 1\\nb = 2\\n", "b = 2", "b = 3").text
'a = 1\\nb = 3\\n'
>>> outcome = apply_edit("if x:\\n    y = 1\\n", "  if x:\\n      y = 1", "  if x:\\n      y = 2")
>>> outcome.text
'if x:\\n    y = 2\\n'
>>> outcome.note.startswith("matched lines 1-2 only after normalising whitespace")
True
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

CONTEXT_LINES = 2
"""Unmarked lines shown around the closest region."""
MAX_SHOWN_LINES = 40
"""At most this many lines of the closest region are shown."""
CANDIDATES = 12
"""At most this many shortlisted windows have their full similarity computed when looking for the closest region."""
RANKING_BUDGET = 10_000
"""Characters of shortlisted windows, all together, whose similarity is computed (fewer candidates for long ones)."""


class EditNotApplied(Exception):
    """The search text does not pick exactly one region of the file; the message tells the model what to do."""


@dataclass(frozen=True)
class EditOutcome:
    """A successful edit."""

    text: str
    """The file's new text."""
    first_line: int
    """1-based number of the first line the search text matched."""
    last_line: int
    """1-based number of the last line it matched."""
    note: str = ""
    """Non-empty when the edit was not an exact match (what was normalised)."""


def apply_edit(text: str, search: str, replace: str) -> EditOutcome:
    """``text`` with the single occurrence of ``search`` replaced by ``replace``; :class:`EditNotApplied` otherwise."""
    if not search.strip():
        raise EditNotApplied("`old` is empty: give the exact text to replace, copied from the file")
    count = text.count(search)
    if count == 1:
        first = text.count("\n", 0, text.index(search)) + 1
        return EditOutcome(text.replace(search, replace, 1), first, first + search.rstrip("\n").count("\n"))
    if count > 1:
        raise EditNotApplied(f"`old` occurs {count} times; include more surrounding lines so that it occurs exactly "
                             "once")
    return _apply_normalised(text, search, replace)


def _apply_normalised(text: str, search: str, replace: str) -> EditOutcome:
    lines, wanted = text.splitlines(keepends=True), _trimmed_lines(search)
    matches = [i for i in range(len(lines) - len(wanted) + 1)
               if all(_same_but_whitespace(lines[i + k], wanted[k]) for k in range(len(wanted)))]
    if len(matches) > 1:
        raise EditNotApplied(f"`old` occurs 0 times exactly, and {len(matches)} times when whitespace is ignored; "
                             "copy it exactly and include more surrounding lines so that it occurs exactly once")
    if not matches:
        raise EditNotApplied(f"`old` occurs 0 times (not found exactly). {closest_region(text, search)}")
    start = matches[0]
    found = lines[start:start + len(wanted)]
    shift = _indent_shift(found, wanted)
    if shift is None:
        raise EditNotApplied(f"`old` matches lines {start + 1}-{start + len(wanted)} only when whitespace is ignored, "
                             "and its indentation differs from theirs unevenly; copy them exactly:\n"
                             + numbered(lines, start, start + len(wanted)))
    ending = "\n" if found[-1].endswith("\n") else ""
    new_lines = _reindent(replace.strip("\n").splitlines(), shift)
    new_block = "\n".join(new_lines) + ending if new_lines else ""
    new_text = "".join(lines[:start]) + new_block + "".join(lines[start + len(wanted):])
    note = (f"matched lines {start + 1}-{start + len(wanted)} only after normalising whitespace (indentation, "
            "trailing spaces)" + ("; the replacement was indented to match" if shift != (0, "") else ""))
    return EditOutcome(new_text, start + 1, start + len(wanted), note)


def _trimmed_lines(search: str) -> list[str]:
    """The search text's lines without the blank lines around them."""
    return search.strip("\n").splitlines()


def _same_but_whitespace(line: str, wanted: str) -> bool:
    return line.strip() == wanted.strip()


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _indent_shift(found: list[str], wanted: list[str]) -> tuple[int, str] | None:
    """``(+1, prefix)`` when every non-blank file line is the wanted line's indentation plus ``prefix``, ``(-1,
    prefix)`` when it is the wanted one's minus ``prefix``, ``(0, "")`` when they agree; None when uneven."""
    shifts = set()
    for have, want in zip(found, wanted, strict=True):
        if not have.strip():
            continue
        have_indent, want_indent = _indent(have.rstrip("\n")), _indent(want)
        if have_indent.startswith(want_indent):
            shifts.add((1, have_indent[len(want_indent):]) if have_indent != want_indent else (0, ""))
        elif want_indent.startswith(have_indent):
            shifts.add((-1, want_indent[len(have_indent):]))
        else:
            return None
    if len(shifts) > 1:
        return None
    return shifts.pop() if shifts else (0, "")


def _reindent(lines: list[str], shift: tuple[int, str]) -> list[str]:
    direction, prefix = shift
    if direction > 0:
        return [prefix + line if line.strip() else line for line in lines]
    if direction < 0:
        return [line[len(prefix):] if line.startswith(prefix) else line.lstrip() for line in lines]
    return lines


def numbered(lines: list[str], start: int, end: int, *, marked: range | None = None) -> str:
    """``lines[start:end]`` with their 1-based numbers, those in ``marked`` (0-based indices) flagged ``>``."""
    width = len(str(end))
    shown = []
    for i in range(start, end):
        flag = ">" if marked is not None and i in marked else " "
        shown.append(f"{flag}{i + 1:>{width}} | {lines[i].rstrip(chr(10))}")
    return "\n".join(shown)


def closest_region(text: str, search: str) -> str:
    """A sentence naming the lines of ``text`` most similar to ``search`` and showing them (marked ``>``) with a
    little context, for the model to copy from; or a note that the file is empty."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return "The file is empty."
    size = max(1, min(len(_trimmed_lines(search)), len(lines)))
    start = _closest_window(lines, _trimmed_lines(search), size)
    end = min(start + size, start + MAX_SHOWN_LINES)
    shown_from, shown_to = max(0, start - CONTEXT_LINES), min(len(lines), end + CONTEXT_LINES)
    region = numbered(lines, shown_from, shown_to, marked=range(start, end))
    return (f"The closest region is lines {start + 1}-{end} (marked >):\n{region}\n"
            "Copy the marked text exactly (without the line numbers and the `>`/`|` prefixes) into `old` and try "
            "again, or read the file first.")


def _closest_window(lines: list[str], search: list[str], size: int) -> int:
    """The start of the ``size``-line window most similar to ``search`` (first one on a tie). Windows are shortlisted
    by how many of their lines occur in ``search`` as they are (cheap, and enough for a long search with a few bad
    lines), or by difflib's quick ratio when no line does; the shortlist is ranked by difflib's ratio."""
    stripped, wanted = [line.strip() for line in lines], {line.strip() for line in search}
    starts = range(len(lines) - size + 1)
    hits = [0]
    for line in stripped:
        hits.append(hits[-1] + (line in wanted and line != ""))
    overlap = [hits[i + size] - hits[i] for i in starts]
    target = "\n".join(line.strip() for line in search)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)

    def similarity(i: int, *, quick: bool = False) -> float:
        matcher.set_seq1("\n".join(stripped[i:i + size]))
        return matcher.quick_ratio() if quick else matcher.ratio()

    keep = max(1, min(CANDIDATES, RANKING_BUDGET // max(1, len(target))))
    if max(overlap) > 0:
        shortlist = sorted(starts, key=lambda i: (-overlap[i], i))[:keep]
    else:
        shortlist = sorted(starts, key=lambda i: (-similarity(i, quick=True), i))[:keep]
    return max(shortlist, key=lambda i: (similarity(i), -i))
