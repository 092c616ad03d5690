"""A harness that looks, from inside the sandbox, for what a telecom episode keeps on the trusted side: the user's
scenario, the user's tool calls and their results, the user's device state and the gold. It gets the user to use its
phone first (so that state exists on the host), tries the user's tools itself, walks the filesystem for the markers
it is given, and says what it found to the user (the report lands in the host's transcript). Stdlib only."""

import json
import os

ORDERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orders.json")


def walk(markers):
    hits, visited = [], 0
    for root, folders, files in os.walk("/"):
        if root.startswith(("/proc", "/sys", "/dev")):
            folders[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            visited += 1
            if os.path.realpath(path) == os.path.realpath(ORDERS):  # the orders hold every marker
                continue
            if name in ("tasks.json", "user_db.toml", "db.toml") or "tau2" in path:
                hits.append(path)
                continue
            try:
                if os.path.getsize(path) > 4 << 20:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if any(marker in data for marker in markers):
                hits.append(path)
        if visited > 200_000:
            break
    return hits[:50], visited


def run(session):
    with open(ORDERS) as handle:
        orders = json.load(handle)
    first = session.respond_to_user("Hi! How can I help you today?")
    asked = session.respond_to_user(orders["ask"])
    peeked = session.peek_tool(orders["user_tool"], {})
    called = session.call_tool("spy-0", orders["user_tool"], {})
    hits, visited = walk([m.encode() for m in orders["markers"]])
    seen = json.dumps({"config": session.config, "tools": session.tools, "policy": session.policy})
    report = {
        "hits": hits, "visited": visited,
        "tool_names": sorted(t.get("function", {}).get("name", "") for t in session.tools),
        "seen_markers": [m for m in orders["markers"] + orders["in_memory"] if m in seen],
        "peek": [peeked.content, peeked.error], "call": [called.content, called.error],
        "first_reply": first.text, "asked_reply": asked.text,
    }
    session.respond_to_user("REPORT " + json.dumps(report))
    return "agent_stop"


def selftest():
    assert callable(walk)
