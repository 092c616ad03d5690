"""A well-behaved harness: one model turn, one tool call, a refused peek, a block, an annotation, a user turn."""

import helper  # a second module of the bundle: the bundle folder is on sys.path


def run(session):
    print("noise on stdout must not break the protocol")
    if session.config.get("raise"):
        raise RuntimeError("boom from the harness")
    if session.config.get("return"):
        return session.config["return"]
    reply = session.complete([{"role": "system", "content": session.policy}], tools=session.tools)
    session.log(f"model said {reply['content']}")
    call = reply["tool_calls"][0]
    result = session.call_tool(call["id"], call["function"]["name"], {"x": 1})
    session.annotate(call["id"], helper.shout(result.content))
    try:
        session.peek_tool("delete_everything", {})
    except Exception as exc:
        session.log(f"peek refused: {type(exc).__name__} {exc.kind}")
    session.block("c2", "delete_everything", {"all": True}, "destructive")
    user = session.respond_to_user("done")
    session.log(f"user said {user.text!r} stop={user.stop}")
    return "agent_stop"


def selftest():
    assert helper.shout("a") == "A!"
