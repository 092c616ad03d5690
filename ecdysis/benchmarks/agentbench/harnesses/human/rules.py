"""Validation rules run before each tool call: a reason blocks the call (the model is told why)."""

import re

_DESTRUCTIVE_SQL = re.compile(r"\bDROP\s+(DATABASE|SCHEMA|TABLE)\b|\bTRUNCATE\b", re.IGNORECASE)
_DESTRUCTIVE_SHELL = re.compile(r"\brm\s+-[a-zA-Z]*[rf][a-zA-Z]*\s+/(\s|$)|\bmkfs\b|:\(\)\s*\{")


def check(name, arguments):
    """Why the call must not run, or None."""
    text = " ".join(str(value) for value in (arguments or {}).values())
    if name == "execute_sql" and _DESTRUCTIVE_SQL.search(text):
        return "dropping or truncating tables destroys the data the task is about"
    if name == "bash_action" and _DESTRUCTIVE_SHELL.search(text):
        return "this command destroys the system the task runs on"
    return None
