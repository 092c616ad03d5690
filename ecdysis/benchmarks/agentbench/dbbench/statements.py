"""The statements an agent may not send to the shared DBBench server, checked on the trusted side before they run.

The server's own settings stop what they can (``skip-symbolic-links``, ``enforce_storage_engine``, ``--maximum-*``
caps, the episode user's grants); what MariaDB has no setting for is refused here:

- status counters (``SHOW [GLOBAL|SESSION] STATUS``, ``information_schema.GLOBAL_STATUS``/``SESSION_STATUS``): most
  are server-wide (even the "session" listing shows global values for counters without a session value), so they
  would carry what one episode did into the next, or into a concurrent one;
- dynamic SQL (``PREPARE``, ``EXECUTE [IMMEDIATE]``, ``DEALLOCATE``): it would build a statement from strings this
  check never sees as such;
- ``DATA DIRECTORY`` / ``INDEX DIRECTORY`` (the server ignores them; refusing says so plainly).

The check over-approximates on purpose: it looks at every run of letters and underscores in the text, wherever it is
(inside comments, executable comments ``/*!50000 … */``, strings, quoted identifiers), after folding case, accents and
compatibility forms as the server's identifier collation does. So no spelling the server would read as one of these
passes, at the price of refusing a statement whose text merely mentions one (a string literal ``'show status'``).
"""

from __future__ import annotations

import re
import unicodedata

REFUSED = ("Error: this statement is not allowed here (server status counters, PREPARE/EXECUTE and DATA/INDEX "
           "DIRECTORY are refused).")
"""What the agent gets back for a refused statement."""

_WORD = re.compile(r"[^\W\d]+")
_DYNAMIC = frozenset({"PREPARE", "EXECUTE", "DEALLOCATE"})
_STATUS_SCOPES = frozenset({"SHOW", "GLOBAL", "SESSION", "LOCAL"})
_DIRECTORY_OPTIONS = frozenset({"DATA", "INDEX"})
_STATUS_TABLES = ("GLOBAL_STATUS", "SESSION_STATUS")


def _fold(text: str) -> str:
    """``text`` with compatibility forms and accents folded and invisible format characters dropped."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))


def _ascii_shape(word: str) -> str:
    """``word`` upper-cased letter by letter, every letter that does not fold to one ASCII letter as ``?``."""
    out = []
    for ch in word:
        upper = ch.upper()
        out.append(upper if len(upper) == 1 and upper.isascii() else "?")
    return "".join(out)


def _names_status_table(shape: str) -> bool:
    # A "?" may be any letter the collation folds onto the one in its place (ß, ø, ł … under utf8mb3_general_ci).
    return any(len(shape) == len(name) and all(a in ("?", b) for a, b in zip(shape, name, strict=True))
               for name in _STATUS_TABLES)


def refusal(sql: str) -> str | None:
    """Why ``sql`` may not run (:data:`REFUSED`), or ``None`` when it may."""
    words = [_ascii_shape(word) for word in _WORD.findall(_fold(sql))]
    for i, word in enumerate(words):
        previous = words[i - 1] if i else ""
        if (word in _DYNAMIC or _names_status_table(word)
                or (word == "STATUS" and previous in _STATUS_SCOPES)
                or (word == "DIRECTORY" and previous in _DIRECTORY_OPTIONS)):
            return REFUSED
    return None
