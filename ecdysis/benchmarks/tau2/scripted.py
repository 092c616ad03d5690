"""Deterministic τ² participants, addressed as ``scripted/ecdysis.benchmarks.tau2.scripted:<function>`` through the
gateway.

Each is a :class:`ecdysis.protocols.ScriptedModelFn`; it reads ``domain`` and ``task_id`` from the gateway context
(the episode puts them there) and the task's gold data from :class:`TauDomain` (trusted side only).

Task models (role ``task``) see the harness's conversation and track their progress by counting the tool calls
already in it, so they work under any harness that keeps the assistant's tool calls in the conversation:

- :func:`gold_agent`: runs the task's gold actions in order as tool calls (one per turn), then sends one message
  containing every ``communicate_info`` string, then only closes politely. Scores 1.0 on every airline and retail task.
- :func:`skip_one_write_agent`: the same, but leaves out the first gold WRITE action: scores 0 on every task that
  has a write (the DB no longer matches).
- :func:`not_object_arguments_agent`: the gold agent after three tool calls whose arguments are not a JSON object
  (a JSON string, a JSON list, malformed JSON): they check that such calls are recorded and exported as sent.
- :func:`repeat_write_agent`: **the documented, harness-fixable flaw.** It behaves like the gold agent, but after
  every successful write it issues the very same write call once more ("retrying" an action that already
  succeeded). Airline writes are not idempotent (``cancel_reservation`` adds the refunds again,
  ``book_reservation`` books a second reservation, ``send_certificate`` sends another), so the duplicate changes the
  DB and the reward drops to 0 (airline task 7 is the reference case); most retail writes refuse the second call
  or repeat the same value, so the flaw shows mainly on airline. Fix: a validation rule that blocks a write
  call identical (name and arguments) to one already executed successfully in the episode. The seed ``human``
  harness deliberately lacks this rule, so an evolution run has something to discover.
- :func:`quirky_agent`: a mix of failures closer to a provider model's (about half of the airline training tasks
  fail). It has ``repeat_write_agent``'s recurring flaw everywhere and, on a fixed third of the tasks
  (:func:`slips_on`, by a hash of the task id), also a slip: on a task with writes it leaves out the first gold
  write (as ``skip_one_write_agent``); on a task without writes it sends the user an unrequested $100 certificate
  (airline). The scripted diagnoser and coder fix only the recurring flaw, so slips stay failures in every round:
  they stand for the model-specific failures a harness edit does not remove.

Telecom (dual control): the gold agent and its variants turn each gold action whose requestor is the user into a
message asking the user to perform it on their phone (:func:`ask_text`, a machine-readable :data:`ASK` line); the
scripted user performs exactly the action asked for, with its own tool, and reports what the phone returned.

- :func:`hasty_agent`: **telecom's documented, harness-fixable flaw.** On every task whose fix needs the phone, it
  asks the customer to toggle airplane mode before it has read the line's status on the account, then reads the
  line and follows the gold actions: the extra toggle fails the task. Fix: the telecom ``human`` loop holds back a
  request to act on the phone until a line's record has been read (:data:`FIXES`' second entry).

User model (role ``user``):

- :func:`scripted_user`: opens with the scenario's reason for calling and known info, answers ``yes`` to any
  question asking for confirmation, performs on its phone any action asked for with :data:`ASK` (telecom) and reports
  the result, and otherwise ends the conversation with ``###STOP###``.
- :func:`meddling_user`: ``scripted_user`` that, on its first reply, also toggles its mobile data without being
  asked (a user action the agent never asked for; telecom).
- :func:`silent_user`: like ``scripted_user`` but answers a confirmation question with whitespace only (a user model
  that a harness's message left with nothing to say).

Diagnosis and coding: :data:`diagnoser` and :data:`coder` find and add the rule that blocks a repeated write, and
on telecom the loop change that fixes :func:`hasty_agent` (:data:`FIXES`; the coder patches the seed's ``loop.py`` as
read from the bundle). :data:`opencode_coder` and :data:`aider_coder` make the same changes through OpenCode's
``edit`` tool and aider's SEARCH/REPLACE format.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.testing.evolution import (
    CannotApply,
    Edits,
    Fix,
    repeats_a_write,
    scripted_aider_coder,
    scripted_coder,
    scripted_diagnoser,
    scripted_opencode_coder,
)

Plan = list[tuple[str, Any]]
"""Steps in the order a scripted agent takes them: tool calls ``(name, arguments)``, and in telecom requests to the
user ``(ASK, {"name": ..., "arguments": ...})`` to perform a user action on their phone."""
ASK = "[on your phone]"
"""Marks a request to perform one user action: ``[on your phone] <tool name> <JSON arguments>``."""
_ASKED = re.compile(r"\[on your phone\] (?P<name>\w+) (?P<arguments>\{.*\})")
STOP = "###STOP###"
CLOSING = "Is there anything else I can help you with?"


def _task(context: dict[str, Any]) -> tuple[TauDomain, Any]:
    domain = TauDomain.load(str(context.get("domain", "")))
    return domain, domain.task(str(context.get("task_id", "")))


def _tool_calls_made(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")


def _final_sent(messages: list[dict[str, Any]], marker: str) -> bool:
    return any(m.get("role") == "assistant" and marker in str(m.get("content") or "") for m in messages)


def _tool_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)  # a str is sent as it is
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": text}}]}


FINAL_MARKER = "Here is a summary of what I did"


def final_message(communicate_info: list[str]) -> str:
    """The closing message: it carries every string the task requires the agent to communicate."""
    facts = "; ".join(communicate_info) if communicate_info else "everything you asked for is handled"
    return f"{FINAL_MARKER}: {facts}."


def ask_text(name: str, arguments: dict[str, Any]) -> str:
    """The agent's request that the user perform ``name(arguments)`` on their phone."""
    return f"Please do this on your phone and tell me what it shows: {ASK} {name} {json.dumps(arguments)}"


NOT_SENT = "Not sent to the customer"
"""How a harness note that held back the agent's message begins (the telecom line-first fix writes it): a held request
was never made, so the scripted agents make it again when their plan still holds it."""


def _asks_made(messages: list[dict[str, Any]]) -> int:
    return sum(1 for i, m in enumerate(messages)
               if m.get("role") == "assistant" and ASK in str(m.get("content") or "") and not _held(messages, i))


def _held(messages: list[dict[str, Any]], i: int) -> bool:
    after = messages[i + 1] if i + 1 < len(messages) else {}
    return after.get("role") == "user" and str(after.get("content") or "").startswith(NOT_SENT)


def _plan_agent(messages: list[dict[str, Any]], context: dict[str, Any], plan: Plan,
                info: list[str]) -> str | dict[str, Any]:
    made = _tool_calls_made(messages) + _asks_made(messages)
    if made < len(plan):
        name, arguments = plan[made]
        if name == ASK:
            return ask_text(arguments["name"], arguments["arguments"])
        return _tool_call(f"scripted-{made}", name, arguments)
    if not _final_sent(messages, FINAL_MARKER):
        return final_message(info)
    return CLOSING


def _gold_plan(context: dict[str, Any]) -> tuple[TauDomain, Plan, list[str]]:
    domain, task = _task(context)
    actions = task.evaluation_criteria.actions or []
    plan = [_step(a.name, dict(a.arguments), str(getattr(a, "requestor", "assistant"))) for a in actions]
    return domain, plan, list(task.evaluation_criteria.communicate_info or [])


def _step(name: str, arguments: dict[str, Any], requestor: str) -> tuple[str, Any]:
    return (ASK, {"name": name, "arguments": arguments}) if requestor == "user" else (name, arguments)


def gold_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               context: dict[str, Any]) -> str | dict[str, Any]:
    """Performs the task's gold actions, then communicates the required info."""
    _, plan, info = _gold_plan(context)
    return _plan_agent(messages, context, plan, info)


def skip_one_write_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                         context: dict[str, Any]) -> str | dict[str, Any]:
    """The gold agent without the first gold write action."""
    domain, plan, info = _gold_plan(context)
    return _plan_agent(messages, context, _without_first_write(domain, plan), info)


NOT_OBJECT_ARGUMENTS = ('"a JSON string"', '["a", "JSON", "list"]', '{"user_id": "ada_lovelace_1815"')
"""Argument texts that are not a JSON object: a JSON string, a JSON list, malformed JSON."""


def not_object_arguments_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                               context: dict[str, Any]) -> str | dict[str, Any]:
    """The gold agent, which first calls the task's first gold tool once with each of :data:`NOT_OBJECT_ARGUMENTS`
    as its argument text (as a model can send them); none of them can execute, so the gold score stands."""
    _, plan, info = _gold_plan(context)
    target = next((name for name, _ in plan if name != ASK), "calculate")
    return _plan_agent(messages, context, [(target, text) for text in NOT_OBJECT_ARGUMENTS] + plan, info)


def repeat_write_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> str | dict[str, Any]:
    """The gold agent with a recurring flaw: every gold write is issued twice in a row (see the module doc)."""
    domain, plan, info = _gold_plan(context)
    return _plan_agent(messages, context, _with_writes_repeated(domain, plan), info)


def _is_write(domain: TauDomain, step: tuple[str, Any]) -> bool:
    return step[0] != ASK and domain.is_write(step[0])


def _with_writes_repeated(domain: TauDomain, plan: Plan) -> Plan:
    doubled: Plan = []
    for name, arguments in plan:
        doubled.append((name, arguments))
        if _is_write(domain, (name, arguments)):
            doubled.append((name, arguments))
    return doubled


def _without_first_write(domain: TauDomain, plan: Plan) -> Plan:
    writes = [i for i, step in enumerate(plan) if _is_write(domain, step)]
    return plan[: writes[0]] + plan[writes[0] + 1:] if writes else plan


def slips_on(domain: str, task_id: str) -> bool:
    """Whether :func:`quirky_agent` slips on this task: a fixed third of the tasks, by a hash of their id."""
    digest = hashlib.sha256(f"{domain}:{task_id}".encode()).digest()
    return digest[0] % 3 == 0


def quirky_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 context: dict[str, Any]) -> str | dict[str, Any]:
    """``repeat_write_agent``, which also slips on the tasks of :func:`slips_on` (see the module doc)."""
    domain, plan, info = _gold_plan(context)
    if slips_on(domain.name, str(context.get("task_id", ""))):
        plan = _slip(domain, plan, context)
    return _plan_agent(messages, context, _with_writes_repeated(domain, plan), info)


_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d+\b")
SLIP_CERTIFICATE_USD = 100


def _slip(domain: TauDomain, plan: Plan, context: dict[str, Any]) -> Plan:
    if any(_is_write(domain, step) for step in plan):
        return _without_first_write(domain, plan)
    _, task = _task(context)
    user = _USER_ID.search(str(task.user_scenario.instructions))
    if "send_certificate" in domain.write_tools and user:
        return [*plan, ("send_certificate", {"user_id": user.group(0), "amount": SLIP_CERTIFICATE_USD})]
    return plan


CONFIRM_WORDS = ("confirm", "(yes/no)", "shall i proceed", "do you want me to proceed")


def scripted_user(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  context: dict[str, Any]) -> str | dict[str, Any]:
    """A deterministic user: states the scenario, confirms when asked, performs an action asked for with :data:`ASK`
    on its phone (when it has tools), then stops.

    It sees the user simulator's conversation, where the agent's utterances have role ``user``, its own tool calls
    role ``assistant`` and their results role ``tool``.
    """
    _, task = _task(context)
    if messages and messages[-1].get("role") == "tool":
        return f"I did it. My phone shows: {messages[-1].get('content')}"
    agent_turns = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    asked = _ASKED.search(agent_turns[-1]) if agent_turns and tools else None
    if asked:
        return _tool_call(f"device-{len(messages)}", asked["name"], asked["arguments"])
    if len(agent_turns) <= 1:
        instructions = task.user_scenario.instructions
        if isinstance(instructions, str):
            return instructions
        parts = [instructions.reason_for_call, instructions.known_info]
        return " ".join(p.strip() for p in parts if p)
    last = agent_turns[-1].lower()
    if any(word in last for word in CONFIRM_WORDS):
        return "Yes, I confirm. Please go ahead."
    return STOP


def silent_user(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                context: dict[str, Any]) -> str | dict[str, Any]:
    """``scripted_user`` until the agent asks for a confirmation, which it answers with whitespace only."""
    reply = scripted_user(messages, tools, context)
    return "  \n" if isinstance(reply, str) and reply.startswith("Yes, I confirm") else reply


MEDDLING_ACTION = "toggle_data"


def meddling_user(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  context: dict[str, Any]) -> str | dict[str, Any]:
    """``scripted_user`` that, on its first reply and before saying anything, toggles its mobile data unasked."""
    own_calls = [m for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]
    said = [m for m in messages if m.get("role") == "assistant" and not m.get("tool_calls")]
    if tools and not own_calls and not said:
        return _tool_call("meddle-0", MEDDLING_ACTION, {})
    if len(own_calls) == 1 and not said and messages[-1].get("role") == "tool":
        return scripted_user(messages[:-2], tools, context)  # now say what it would have said first
    return scripted_user(messages, tools, context)


_RESERVATION_ID = re.compile(r"\b[A-Z0-9]{6}\b")


def eager_cancel_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> str | dict[str, Any]:
    """A policy-blind agent: it first cancels every reservation the user wants cancelled that the gold actions do
    not cancel (no policy check), then behaves like the gold agent. The ``human`` harness's airline cancellation
    rule blocks those calls (airline task 0 is the reference case); the ``direct`` harness executes them."""
    domain, plan, info = _gold_plan(context)
    _, task = _task(context)
    instructions = task.user_scenario.instructions
    reason = instructions if isinstance(instructions, str) else instructions.reason_for_call or ""
    eager: list[tuple[str, dict[str, Any]]] = []
    if domain.name == "airline" and "cancel" in reason.lower():
        gold_cancels = {args.get("reservation_id") for name, args in plan if name == "cancel_reservation"}
        for rid in _RESERVATION_ID.findall(reason):
            if rid not in gold_cancels:
                eager.append(("cancel_reservation", {"reservation_id": rid}))
    return _plan_agent(messages, context, eager + plan, info)


HASTY_ACTION = "toggle_airplane_mode"
"""The phone action :func:`hasty_agent` asks for first, unchecked: a toggle, so it always leaves the phone in another
state than the task's gold actions do."""
LINE_LOOKUP = "get_details_by_id"
"""The agent tool that reads a line's record (its status, roaming, data) on the account."""
_PHONE_NUMBER = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")


def hasty_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                context: dict[str, Any]) -> str | dict[str, Any]:
    """Telecom: **a recurring, harness-fixable flaw.** On every task whose fix needs the customer's phone, it first asks
    the customer to toggle airplane mode (:data:`HASTY_ACTION`) before it has checked anything on the account, then
    reads the line's record, then behaves like the gold agent. The extra toggle leaves the phone in another state
    than the gold one, so each such task fails (on tasks fixed on the account alone it checks the line and passes).

    Fix: a loop change that holds back the agent's first request to act on the phone until a line's status has been
    read on the account (:func:`_line_first_edits`). Told so (a :data:`NOT_SENT` note), the agent drops its guess,
    reads the line and goes on with the gold actions."""
    domain, plan, info = _gold_plan(context)
    lookup = _line_lookup(domain, context)
    told = any(m.get("role") == "user" and str(m.get("content") or "").startswith(NOT_SENT) for m in messages)
    hasty = not told and any(name == ASK for name, _ in plan)
    first = [(ASK, {"name": HASTY_ACTION, "arguments": {}})] if hasty else []
    return _plan_agent(messages, context, first + lookup + plan, info)


def _line_lookup(domain: TauDomain, context: dict[str, Any]) -> Plan:
    """The read of the customer's line (found by the phone number the user scenario gives), or nothing."""
    _, task = _task(context)
    instructions = task.user_scenario.instructions
    known = instructions if isinstance(instructions, str) else str(instructions.known_info or "")
    phone = _PHONE_NUMBER.search(known)
    lines = domain.raw_records("lines") if phone else []
    line = next((r for r in lines if phone and r.get("phone_number") == phone.group(0)), None)
    return [(LINE_LOOKUP, {"id": line["line_id"]})] if line else []


# -- the harness fix of repeat_write_agent's flaw, for the scripted diagnoser and coder -----------------------------

REPEAT_MARKER = "done_writes"
_WRITE_BRANCH = re.compile(r"^(?P<indent>[ \t]*)if name in self\.write_tools:\n[ \t]+reply = self\.session\."
                           r"respond_to_user\(.*\)\n", re.MULTILINE)
_EXECUTE = re.compile(r"^(?P<indent>[ \t]*)result = self\.session\.call_tool\(call_id, name, arguments\)\n",
                      re.MULTILINE)
_BLOCK_REPEAT = """{i}key = (name, json.dumps(arguments, sort_keys=True))
{i}if name in self.write_tools and key in getattr(self, "done_writes", set()):
{i}    reason = "this exact write already succeeded in this conversation; do not repeat it"
{i}    self.session.block(call_id, name, arguments, reason)
{i}    return "Blocked by policy check, not executed: %s" % reason
"""
_REMEMBER_WRITE = """{i}if name in self.write_tools and not result.error:
{i}    self.done_writes = getattr(self, "done_writes", set()) | {{key}}
"""


def _repeat_block_edits(text: str) -> Edits:
    """Edits of the ``human`` harness's ``loop.py`` (as read from the bundle): block a write identical to one that
    already succeeded in the episode, and remember each successful write."""
    if REPEAT_MARKER in text:
        return []
    branch, execute = _WRITE_BRANCH.search(text), _EXECUTE.search(text)
    if branch is None or execute is None:
        raise CannotApply("loop.py has no write-confirmation branch followed by a tool call to guard")
    return [(branch.group(0), _BLOCK_REPEAT.format(i=branch["indent"]) + branch.group(0)),
            (execute.group(0), execute.group(0) + _REMEMBER_WRITE.format(i=execute["indent"]))]


# -- the harness fix of hasty_agent's flaw (telecom) ----------------------------------------------------------------

LINE_FIRST_MARKER = "line_checked"
_CLASS = re.compile(r"^class Episode\b.*\n", re.MULTILINE)
_RUN = re.compile(r"^(?P<indent>[ \t]*)def run\(self\):\n", re.MULTILINE)
_SAY_TEXT = re.compile(r"^(?P<indent>[ \t]*)self\.say\(text\)\n", re.MULTILINE)
_DEVICE_HELPERS = '''DEVICE_WORDS = ("on your phone", "on your device", "airplane mode", "mobile data", "toggle",
                "reboot", "restart your")
LINE_FIRST = ("{not_sent}: read the line's status on the account first (get_details_by_id on their "
              "line); then guide them on their phone.")


def asks_for_device_action(text):
    """Whether a message asks the customer to do something on their phone."""
    lowered = (text or "").lower()
    return any(word in lowered for word in DEVICE_WORDS)


'''
_HOLDS = '''{i}def holds(self, text):
{i}    """Hold back, once, a request to act on the phone made before any line's status was read on the account: the
{i}    model sees its message and a note, the customer sees nothing."""
{i}    if getattr(self, "line_checked", False) or getattr(self, "line_reminded", False):
{i}        return False
{i}    if not asks_for_device_action(text):
{i}        return False
{i}    self.line_reminded = True
{i}    self.messages.append({{"role": "assistant", "content": text}})
{i}    self.messages.append({{"role": "user", "content": LINE_FIRST}})
{i}    return True

'''
_HOLD_CHECK = '''{i}if self.holds(text):
{i}    continue
'''
_SEEN_LINE = '''{i}if name == "get_details_by_id" and not result.error and '"line_id"' in (result.content or ""):
{i}    self.line_checked = True
'''


def _line_first_edits(text: str) -> Edits:
    """Edits of the telecom ``human`` harness's ``loop.py`` (as read from the bundle): remember when a line's record
    was read, and hold back (once) a message asking the customer to act on their phone before that."""
    if LINE_FIRST_MARKER in text:
        return []
    episode, run, say, execute = (p.search(text) for p in (_CLASS, _RUN, _SAY_TEXT, _EXECUTE))
    if episode is None or run is None or say is None or execute is None:
        raise CannotApply("loop.py has no Episode class with a run loop that says the model's text and a tool call")
    return [(episode.group(0), _DEVICE_HELPERS.format(not_sent=NOT_SENT) + episode.group(0)),
            (execute.group(0), execute.group(0) + _SEEN_LINE.format(i=execute["indent"])),
            (run.group(0), _HOLDS.format(i=run["indent"]) + run.group(0)),
            (say.group(0), _HOLD_CHECK.format(i=say["indent"]) + say.group(0))]


def talks_before_reading(record: dict[str, Any], tool: str = LINE_LOOKUP) -> bool:
    """Whether a telecom failure's agent spoke to the customer before it first read a line's record with ``tool``
    (a model turn with no tool call came first), or never read one."""
    if record.get("domain") != "telecom":
        return False
    history = record.get("tool_call_history") or []
    first = next((int(c.get("step") or 0) for c in history if c.get("name") == tool and c.get("executed")), None)
    if first is None:
        return True
    busy = {int(c.get("step") or 0) for c in history}
    return any(step not in busy for step in range(1, first))


FIXES = (
    Fix(hint="Block a write call identical (name and arguments) to one that already succeeded in this episode.",
        recognises=lambda record: repeats_a_write(record.get("tool_call_history") or []),
        file="loop.py", edits=_repeat_block_edits),
    Fix(hint="Hold back a message asking the customer to act on their phone until the line's status has been read "
             "on the account.",
        recognises=talks_before_reading, file="loop.py", edits=_line_first_edits, component="loop_control"),
)
diagnoser = scripted_diagnoser(FIXES)
coder = scripted_coder(FIXES)
opencode_coder = scripted_opencode_coder(FIXES)
aider_coder = scripted_aider_coder(FIXES)
