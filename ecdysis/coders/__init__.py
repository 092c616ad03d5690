"""Coding agents as a registry: ``training.coder`` is one member of :data:`CoderConfig`, chosen by ``type``.

| type       | what edits the bundle copy                                             |
|------------|------------------------------------------------------------------------|
| builtin    | the in-process tool loop (:mod:`ecdysis.coders.builtin_agent`)             |
| opencode   | OpenCode 1.18.33 in a no-network bubblewrap sandbox (:mod:`.opencode`) |
| aider      | aider 0.86.2 in a no-network bubblewrap sandbox (:mod:`.aider`)        |

Every one is driven by ``models.coder`` through our gateway (role ``coder``). A new agent is one module with a config
class (``type``, ``build(llm, model, backend)``) plus one line in :data:`CODERS` and :data:`CoderConfig`.

>>> from pydantic import TypeAdapter
>>> TypeAdapter(CoderConfig).validate_python(as_section("opencode")).type      # a bare name is {type: name}
'opencode'
>>> TypeAdapter(CoderConfig).validate_python({}).type                          # no type: the built-in agent
'builtin'
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Tag

from ecdysis.coders.aider import AiderConfig
from ecdysis.coders.builtin import BuiltinCoderConfig
from ecdysis.coders.opencode import OpenCodeConfig
from ecdysis.coders.sandboxed import CLIRun, CodingAgentFailed, SandboxedCLIAgent

CODERS: dict[str, type[BuiltinCoderConfig | OpenCodeConfig | AiderConfig]] = {
    "builtin": BuiltinCoderConfig,
    "opencode": OpenCodeConfig,
    "aider": AiderConfig,
}
"""Registry: coding agent name → its config class."""
DEFAULT = "builtin"


def _type_of(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", DEFAULT))
    return str(getattr(value, "type", DEFAULT))


def as_section(value: Any) -> Any:
    """``training.coder`` as written: a bare agent name stands for ``{type: name}``."""
    return {"type": value} if isinstance(value, str) else value


CoderConfig = Annotated[
    Annotated[BuiltinCoderConfig, Tag("builtin")]
    | Annotated[OpenCodeConfig, Tag("opencode")]
    | Annotated[AiderConfig, Tag("aider")],
    Discriminator(_type_of, custom_error_type="unknown_coder",
                  custom_error_message=f"unknown coding agent; known: {', '.join(CODERS)}"),
]
"""The ``training.coder:`` section (a bare string names the type)."""


__all__ = [
    "CODERS",
    "AiderConfig",
    "BuiltinCoderConfig",
    "CLIRun",
    "CoderConfig",
    "CodingAgentFailed",
    "OpenCodeConfig",
    "SandboxedCLIAgent",
    "as_section",
]
