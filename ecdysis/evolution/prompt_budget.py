"""How many characters of failure evidence and harness source one diagnosis prompt may hold.

Three limits can apply, and every one given holds (the prompt gets the smallest):

- ``training.prompt_budget_chars``, in characters (the setting configs have always had);
- ``training.prompt_budget_tokens``, in tokens;
- the diagnosis model's context window (``llm.models.<model>.context_tokens``, a local server's ``n_ctx``, else
  litellm's model map), less the reply it may write, what every diagnosis prompt holds besides the evidence (the
  longest template and the largest reply schema) and a tenth of the window for what a method adds (FDCR's
  attribution table, causes and earlier passes).

Tokens become characters at :data:`ecdysis.llm.tokens.CHARS_PER_TOKEN`.

>>> budget_chars(chars=70_000, tokens=10_000)
30000
"""

from __future__ import annotations

import functools
from importlib import resources

from ecdysis.evolution.fdcr.roles import AnalystOutput, CriticOutput, EngineerOutput
from ecdysis.llm import structured
from ecdysis.llm.tokens import DEFAULT_REPLY_TOKENS, chars_for_tokens, estimate_tokens
from ecdysis.records import SpecReply

MIN_ROOM_TOKENS = 1_000
"""Below this many tokens for evidence and source, a diagnosis cannot be asked for: the run refuses to start."""
TEMPLATE_PACKAGES = ("ecdysis.evolution.prompts", "ecdysis.evolution.fdcr.prompts")


@functools.cache
def fixed_prompt_tokens() -> int:
    """Tokens a diagnosis prompt takes besides evidence and source: its longest template and its largest schema."""
    templates = [entry.read_text(encoding="utf-8") for package in TEMPLATE_PACKAGES
                 for entry in resources.files(package).iterdir() if entry.name.endswith(".md")]
    schemas = [structured.instruction(s) for s in (SpecReply, AnalystOutput, CriticOutput, EngineerOutput)]
    return estimate_tokens(max(templates, key=len)) + estimate_tokens(max(schemas, key=len))


def room_in_context(context_tokens: int, reply_tokens: int = DEFAULT_REPLY_TOKENS) -> int:
    """Tokens left for evidence and source in a ``context_tokens`` window; a ValueError that says why when too few."""
    fixed = fixed_prompt_tokens()
    room = context_tokens - reply_tokens - fixed - context_tokens // 10
    if room < MIN_ROOM_TOKENS:
        raise ValueError(f"the diagnosis model's context of {context_tokens} tokens leaves {room} tokens for failure "
                         f"evidence and harness source (after {reply_tokens} for its reply, about {fixed} for the "
                         f"instructions and a tenth in reserve), under the {MIN_ROOM_TOKENS} a diagnosis needs: use a "
                         "model with a larger context, or lower its params.max_tokens")
    return room


def budget_chars(*, chars: int, tokens: int | None = None, context_tokens: int | None = None,
                 reply_tokens: int = DEFAULT_REPLY_TOKENS) -> int:
    """The characters of evidence plus source one diagnosis prompt may hold under every limit given."""
    limits = [chars]
    if tokens is not None:
        limits.append(chars_for_tokens(tokens))
    if context_tokens is not None:
        limits.append(chars_for_tokens(room_in_context(context_tokens, reply_tokens)))
    return min(limits)
