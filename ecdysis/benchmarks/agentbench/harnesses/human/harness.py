"""The ``human`` seed harness for AgentBench: a hand-improved loop, split into parts a coding agent can edit:

- ``prompt.py``: guidance added to the benchmark's system prompt;
- ``rules.py``: validation rules run before each tool call (block what can only do harm);
- ``loop.py``: the loop (one tool call per turn, malformed arguments sent back to the model, step budget).

The host names the tools that end the episode in ``session.config["answer_tools"]``. Stdlib only.
"""

import loop
import rules


def run(session):
    """One episode."""
    return loop.Episode(session).run()


def selftest():
    assert callable(run)
    assert rules.check("execute_sql", {"query": "DROP DATABASE x"}) is not None
    assert rules.check("bash_action", {"script": "ls -la"}) is None
