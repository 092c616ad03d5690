"""The trusted side of one τ²-bench episode: the task's private DB, τ²'s simulated user, τ²'s grade.

``llm.complete`` goes to the gateway and the sandbox is driven by the shared episode layer
(:func:`ecdysis.benchmarks.episode.run_episode`); this module supplies what is τ²'s own:

- ``user.respond`` by the user simulator (:mod:`ecdysis.benchmarks.tau2.user`): a simulator failure ends the episode as
  ``infrastructure_error`` (the simulator is part of the benchmark, so its failures say nothing about the harness),
  except that a provider refusing what the agent said (400/413/422) ends it as ``harness_error``, and a crossed
  budget or deadline as ``budget_exceeded`` / ``timeout``; an empty user reply ends it as ``user_stop``, graded (the
  agent's message provoked it, so it is the harness's outcome);
- ``tool.call`` / ``tool.peek`` on the episode's private :class:`EpisodeEnv`;
- in telecom (dual control), the user's own tool calls, made during ``user.respond`` on the same private environment
  (its copy of the user's phone and of the DB) and handed to the transcript by :meth:`take_user_steps`; the sandbox
  sees only what the user then says;
- the grade: a replay of the executed write calls, as τ²'s ``evaluate_simulation`` grades (:mod:`.grading`).
"""

from __future__ import annotations

from typing import Any

from ecdysis.benchmarks.episode import agent_texts
from ecdysis.benchmarks.tau2 import transcript
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.grading import grade
from ecdysis.benchmarks.tau2.user import EmptyUserReply, UserSimulator, UserSimulatorError, UserToolLoop
from ecdysis.llm.errors import BudgetExceeded, DeadlineExceeded
from ecdysis.protocols import LLMClient
from ecdysis.records import TerminationReason, TokenUsage
from ecdysis.sandbox.driver import EndEpisode


class Tau2Environment:
    """One episode of a τ² task (an :class:`ecdysis.protocols.EpisodeEnvironment`)."""

    finished = False

    def __init__(self, domain: TauDomain, task_id: str, *, llm: LLMClient, user_model: str,
                 context: dict[str, Any]) -> None:
        self.domain = domain
        self.task_id = task_id
        self.env = domain.new_env(task_id)
        self.user = UserSimulator(llm, user_model, domain.task(task_id), context=context,
                                  tools=domain.user_tool_schemas or None,
                                  act=self.env.user_call if domain.dual_control else None)
        self.policy = domain.policy
        self.tools = domain.tool_schemas
        self.config = {"domain": domain.name, "write_tools": sorted(domain.write_tools)}

    def respond(self, text: str, *, deadline: float | None) -> tuple[str, bool]:
        from ecdysis.llm.retry import is_input_rejection

        try:
            reply = self.user.respond(text, deadline=deadline)
        except EmptyUserReply as exc:
            raise EndEpisode(TerminationReason.USER_STOP, str(exc)) from exc
        except UserToolLoop as exc:  # τ²'s run would have reached its step limit
            raise EndEpisode(TerminationReason.MAX_STEPS, str(exc)) from exc
        except UserSimulatorError as exc:
            cause = exc.__cause__
            if isinstance(cause, BudgetExceeded):  # the run's budget, not a fault of the simulator
                raise EndEpisode(TerminationReason.BUDGET_EXCEEDED, str(cause)) from exc
            if isinstance(cause, DeadlineExceeded):
                raise EndEpisode(TerminationReason.TIMEOUT, "the episode's hard wall-clock cap ran out during a "
                                                            f"user-simulator call: {cause}") from exc
            if is_input_rejection(cause):  # the user model refused what the agent said: the harness's doing
                raise EndEpisode(TerminationReason.HARNESS_ERROR,
                                 f"the user simulator's model rejected the agent's message: {exc}") from exc
            raise EndEpisode(TerminationReason.INFRASTRUCTURE_ERROR, str(exc)) from exc
        return reply.text, reply.stop

    def take_user_steps(self) -> list[dict[str, Any]]:
        """The user's own tool calls since the last take, as transcript entries (dual control; else none)."""
        return self.user.take_steps()

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        return self.env.call(name, arguments)

    def peek(self, name: str, arguments: Any) -> tuple[str, bool]:
        return self.env.peek(name, arguments)

    def grade(self, reason: TerminationReason, messages: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
        result = grade(self.domain, self.task_id, reason, transcript.executed_calls(messages), agent_texts(messages))
        return result.reward, result.breakdown

    def usage(self) -> tuple[TokenUsage, int, int, float | None]:
        return self.user.tokens, self.user.calls, self.user.cache_hits, self.user.cost_usd

    def close(self) -> None:
        """Nothing to release: the episode's DB copy goes with this object."""
