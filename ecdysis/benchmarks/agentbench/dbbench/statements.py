"""The statements an agent may not send to the shared DBBench server, checked on the trusted side before they run.

The server's own settings stop what they can (``skip-symbolic-links``, ``enforce_storage_engine``, ``--maximum-*``
caps, the episode user's grants); what MariaDB has no setting for is refused here:

- status counters (``SHOW [GLOBAL|SESSION|LOCAL] STATUS``, ``information_schema.GLOBAL_STATUS``/``SESSION_STATUS``):
  most are server-wide (even the "session" listing shows global values for counters without a session value), so
  they would carry what one episode did into the next, or into a concurrent one;
- the named-lock functions (``GET_LOCK``, ``RELEASE_LOCK``, ``IS_USED_LOCK``, ``IS_FREE_LOCK``,
  ``RELEASE_ALL_LOCKS``): a lock name is server-wide, so one episode's lock is seen by another;
- dynamic SQL (``PREPARE``, ``EXECUTE [IMMEDIATE]``, ``DEALLOCATE``): it would build a statement from strings this
  check never sees as code;
- ``DATA DIRECTORY`` / ``INDEX DIRECTORY`` (the server ignores them; refusing says so plainly);
- executable comments (``/*! … */``, ``/*!50000 … */``, ``/*M! … */``): the server runs their content;
- changes of ``sql_mode`` or of the client character set (``SET NAMES``, ``SET CHARACTER SET``,
  ``character_set_client``): they change how the server splits a statement into tokens (``ANSI_QUOTES``,
  ``NO_BACKSLASH_ESCAPES``, a multi-byte charset that swallows a backslash), so this check would read a statement
  other than the one that runs.

The check reads the statement's tokens as MariaDB's lexer splits them, with sqlglot's MySQL tokenizer: comments
(``/* */``, ``#``, ``-- ``) are not code, ``1--1`` is arithmetic, string literals are data. Where that tokenizer and
the server could split differently the statement is refused or made to agree first: a NUL or other control character
(DEL included: the tokenizer takes ``--`` before it for a comment) is refused, and a non-ASCII character the
tokenizer would take for a space (the server takes it for part of a name) becomes ``_``. Names are compared after
folding case, accents and compatibility forms as the server's identifier collation does (``GLØBAL_STATUS`` is
``GLOBAL_STATUS`` to the server); the fold applies to each token's text, never to the statement, so that a
full-width quote cannot open a string here that the server does not see.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import Token

REFUSED = ("Error: this statement is not allowed here (server status counters, named locks, PREPARE/EXECUTE, "
           "DATA/INDEX DIRECTORY, executable comments and sql_mode or character set changes are refused).")
"""What the agent gets back for a refused statement."""

_DYNAMIC = frozenset({"PREPARE", "EXECUTE", "DEALLOCATE"})
_LOCK_FUNCTIONS = ("GET_LOCK", "RELEASE_LOCK", "IS_USED_LOCK", "IS_FREE_LOCK", "RELEASE_ALL_LOCKS")
_STATUS_TABLES = ("GLOBAL_STATUS", "SESSION_STATUS")
_LEXING_SETTINGS = ("SQL_MODE", "CHARACTER_SET_CLIENT")
_REFUSED_NAMES = _LOCK_FUNCTIONS + _STATUS_TABLES + _LEXING_SETTINGS
_STATUS_SCOPES = frozenset({"SHOW", "GLOBAL", "SESSION", "LOCAL"})
_DIRECTORY_OPTIONS = frozenset({"DATA", "INDEX"})
_CHARSET_WORDS = frozenset({"NAMES", "CHARSET", "CHARACTER"})
_SERVER_SPACES = frozenset(" \t\n\v\f\r")
_SERVER_CONTROLS_ALLOWED = frozenset("\t\n\v\f\r")
_TOKENIZER = MySQL.tokenizer_class


def _fold(text: str) -> str:
    """``text`` with compatibility forms and accents folded and invisible format characters dropped."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))


def _ascii_shape(word: str) -> str:
    """``word`` upper-cased letter by letter, every letter that does not fold to one ASCII letter as ``?``."""
    out = []
    for ch in _fold(word):
        upper = ch.upper()
        out.append(upper if len(upper) == 1 and upper.isascii() else "?")
    return "".join(out)


def _names_one_of(shape: str, names: tuple[str, ...]) -> bool:
    # A "?" may be any letter the collation folds onto the one in its place (ß, ø, ł … under utf8mb3_general_ci).
    return any(len(shape) == len(name) and all(a in ("?", b) for a, b in zip(shape, name, strict=True))
               for name in names)


def _as_the_server_lexes(sql: str) -> str | None:
    """``sql`` made to split here as the server splits it, or ``None`` where it cannot be (a control character)."""
    if any((ord(ch) < 32 or ch == "\x7f") and ch not in _SERVER_CONTROLS_ALLOWED for ch in sql):
        return None
    # The server's spaces are ASCII; the tokenizer also skips Unicode spaces, which the server reads as name letters.
    return "".join("_" if ch.isspace() and ch not in _SERVER_SPACES else ch for ch in sql)


def _statements(tokens: list[Token]) -> Iterator[list[str]]:
    """The code words of each ``;``-separated statement: names and keywords as ASCII shapes, literals as ``''``."""
    words: list[str] = []
    for token in tokens:
        if token.token_type.name == "SEMICOLON":
            yield words
            words = []
        else:
            words.append("" if token.token_type.name.endswith("STRING") else _ascii_shape(token.text))
    yield words


def _is_executable(comment: str) -> bool:
    return comment.startswith("!") or comment[:2].upper() == "M!"


def _refuses(words: list[str]) -> bool:
    for i, word in enumerate(words):
        previous = words[i - 1] if i else ""
        if (word in _DYNAMIC or _names_one_of(word, _REFUSED_NAMES)
                or (word == "STATUS" and previous in _STATUS_SCOPES)
                or (word == "DIRECTORY" and previous in _DIRECTORY_OPTIONS)):
            return True
    return bool(words) and words[0] == "SET" and not _CHARSET_WORDS.isdisjoint(words)


def refusal(sql: str) -> str | None:
    """Why ``sql`` may not run (:data:`REFUSED`), or ``None`` when it may."""
    text = _as_the_server_lexes(sql)
    if text is None:
        return REFUSED
    try:
        # The closing ";" on a line of its own collects the comments of a statement that has no token of its own.
        tokens = _TOKENIZER().tokenize(text + "\n;")
    except TokenError:  # an unclosed string, name or comment: the server refuses it too
        return REFUSED
    if any(_is_executable(comment) for token in tokens for comment in token.comments):
        return REFUSED
    return REFUSED if any(_refuses(words) for words in _statements(tokens)) else None
