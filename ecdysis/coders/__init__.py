"""Coding agents as ``coder`` extensions (:mod:`ecdysis.extensions`): ``training.coder`` is the registered config
its ``type`` names.

| type       | what edits the bundle copy                                             |
|------------|------------------------------------------------------------------------|
| builtin    | the in-process tool loop (:mod:`ecdysis.coders.builtin_agent`)         |
| opencode   | OpenCode 1.18.33 in a no-network bubblewrap sandbox (:mod:`.opencode`) |
| aider      | aider 0.86.2 in a no-network bubblewrap sandbox (:mod:`.aider`)        |

Every one is driven by ``models.coder`` through our gateway (role ``coder``). A new agent is one module with a
:class:`CoderSection` subclass (``type``, ``build(llm, model, backend)``) and a ``register("coder", ...)`` call.

>>> from pydantic import TypeAdapter
>>> TypeAdapter(CoderConfig).validate_python("opencode").type      # a bare name is {type: name}
'opencode'
>>> TypeAdapter(CoderConfig).validate_python({}).type              # no type: the built-in agent
'builtin'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ecdysis.coders.aider import AiderConfig
from ecdysis.coders.base import CoderSection
from ecdysis.coders.builtin import BuiltinCoderConfig
from ecdysis.coders.opencode import OpenCodeConfig
from ecdysis.coders.sandboxed import CLIRun, CodingAgentFailed, SandboxedCLIAgent
from ecdysis.extensions import section

DEFAULT = "builtin"

if TYPE_CHECKING:
    CoderConfig = CoderSection
else:
    CoderConfig = section("coder", CoderSection, default=DEFAULT)
    """The ``training.coder:`` section (a bare string names the type)."""


__all__ = [
    "DEFAULT",
    "AiderConfig",
    "BuiltinCoderConfig",
    "CLIRun",
    "CoderConfig",
    "CoderSection",
    "CodingAgentFailed",
    "OpenCodeConfig",
    "SandboxedCLIAgent",
]
