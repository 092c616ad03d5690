"""Every extension point behind one registry (:mod:`.registry`) and the config sections derived from it
(:mod:`.sections`). See ``ecdysis list`` for what is installed."""

from ecdysis.extensions.registry import (
    ENTRY_POINT_GROUP,
    KINDS,
    Extension,
    Kind,
    UnknownExtension,
    entries,
    lookup,
    names,
    register,
    reset,
)
from ecdysis.extensions.sections import section, validate_section

__all__ = [
    "ENTRY_POINT_GROUP",
    "KINDS",
    "Extension",
    "Kind",
    "UnknownExtension",
    "entries",
    "lookup",
    "names",
    "register",
    "reset",
    "section",
    "validate_section",
]
