"""The simulated user: τ²'s prompt and stop tokens, and the scripted user through the real gateway."""

from __future__ import annotations

from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.user import STOP_TOKENS, UserSimulator, is_stop, system_prompt

SCRIPTED_USER = "scripted/ecdysis.benchmarks.tau2.scripted:scripted_user"


def test_stop_tokens() -> None:
    assert STOP_TOKENS == ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
    assert all(is_stop(f"Thanks. {token}") for token in STOP_TOKENS)
    assert not is_stop("Please stop the charge.")


def test_prompt_has_guidelines_and_hidden_scenario(retail: TauDomain) -> None:
    text = system_prompt(retail.task("0"))
    assert "<scenario>" in text and "Yusuf Rossi" in text and "You do not remember your email address" in text
    assert "###STOP###" in text  # τ²'s guidelines tell the user how to end


def test_scripted_user_through_the_gateway(retail: TauDomain, shared_gateway: object) -> None:
    user = UserSimulator(shared_gateway, SCRIPTED_USER, retail.task("0"),  # type: ignore[arg-type]
                         context={"domain": "retail", "task_id": "0", "run_id": "test-tau"})
    opening = user.respond("Hi! How can I help you today?")
    assert not opening.stop and "#W2378156" in opening.text and "Yusuf Rossi" in opening.text
    confirm = user.respond("Do you confirm (yes/no)?")
    assert not confirm.stop and confirm.text.lower().startswith("yes")
    done = user.respond("All done.")
    assert done.stop and user.stopped and user.calls == 3 and user.tokens.total > 0
