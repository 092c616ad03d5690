"""The one place that starts the ``local/<name>`` model servers of a run (``ecdysis demo``, ``ecdysis study``), routes
a gateway config to them, and reads how many episodes they decode at once (the build layer's rollout settings).

Example::

    with serve_local_models(["qwen-1.5b"], n_ctx=16384, serving=cfg.llm.local) as servers:
        llm = routed_to(cfg.llm, servers.values())
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

from ecdysis.llm.config import GatewayConfig, LocalServingConfig
from ecdysis.llm.local_models import SPLIT_MODELS, fetch_split_model
from ecdysis.llm.local_server import LocalModelServer, served_slots
from ecdysis.llm.routing import route


@contextlib.contextmanager
def serve_local_models(names: Sequence[str], *, n_ctx: int, serving: LocalServingConfig | None = None,
                       chat_format: Callable[[str], str | None] = lambda name: None,
                       announce: Callable[[LocalModelServer], None] = lambda server: None,
                       ) -> Iterator[dict[str, LocalModelServer]]:
    """One started server per model of ``names`` (an opt-in split model is fetched first), by name, stopped on exit
    (the last started first: it restores the endpoint variable first). Engine and slots as ``serving`` (the config's
    ``llm.local``) says; ``chat_format`` names each model's llama.cpp chat format (None: the GGUF's own template);
    ``announce`` is told of each server once it is up."""
    servers: dict[str, LocalModelServer] = {}
    try:
        for name in names:
            if name in SPLIT_MODELS:
                fetch_split_model(name)
            server = LocalModelServer(name, chat_format=chat_format(name), n_ctx=n_ctx,
                                      engine=serving.engine if serving else "auto",
                                      parallel=serving.parallel if serving else None)
            servers[name] = server.start()
            announce(server)
        yield servers
    finally:
        for server in reversed(servers.values()):
            server.stop()


def routed_to(llm: GatewayConfig, servers: Iterable[LocalModelServer]) -> GatewayConfig:
    """``llm`` with each server's model routed to it (endpoint, tool-call parsing, slots, context and streaming over
    the config's own entry for that model)."""
    routes = dict(llm.models)
    for server in servers:
        served = server.model_config()
        entry = routes.get(server.model)
        routes[server.model] = served if entry is None else entry.model_copy(
            update={"api_base": served.api_base, "tool_call_parsing": served.tool_call_parsing,
                    "max_concurrency": served.max_concurrency, "context_tokens": served.context_tokens,
                    "streaming": served.streaming})
    return llm.model_copy(update={"models": routes})


def local_task_slots(task_models: list[str], gateway: GatewayConfig) -> int | None:
    """The fewest slots among the llama-servers serving ``task_models`` when every one is a ``local/`` model whose
    server says (``/props``), else None: a run on a batched local server runs as many episodes at once as it has
    slots, not as many as this machine has CPUs."""
    slots: list[int] = []
    for model in task_models:
        try:
            target = route(model, gateway)
        except Exception:
            return None
        if not target.local or not target.api_base:
            return None
        served = served_slots(target.api_base)
        if served is None:
            return None
        slots.append(served)
    return min(slots) if slots else None
