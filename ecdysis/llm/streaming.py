"""A completion received as a stream and handed back whole, so that giving up on it closes the connection while the
server still decodes, and the server's next write to it fails: llama-cpp-python's server stops only a streamed
request whose client left, and llama-server noticed a plain request's closed connection only some of the time (in 4
of 8 tries it decoded the abandoned reply to its end), a streamed one every time."""

from __future__ import annotations

import time
from typing import Any

from ecdysis.llm._litellm import litellm


def streamed(kwargs: dict[str, Any], give_up_at: float) -> Any:
    """``litellm.completion(**kwargs)`` streamed and rebuilt into one response (usage included). Past ``give_up_at``
    (a ``time.monotonic()`` instant) the stream is closed and ``litellm.Timeout`` raised (retryable, as a plain call's
    timeout): a stream's timeout bounds each read, not the whole reply."""
    stream = litellm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks: list[Any] = []
    try:
        for chunk in stream:
            chunks.append(chunk)
            if time.monotonic() > give_up_at:
                raise litellm.Timeout(f"the streamed reply took longer than its {kwargs.get('timeout')}s timeout",
                                      model=kwargs.get("model"), llm_provider="openai")
    finally:
        stream.close()  # closes the connection: the server sees its client leave
    response = litellm.stream_chunk_builder(chunks, messages=kwargs.get("messages"))
    if response is None:
        raise ValueError("the model's stream held no reply")
    return response
