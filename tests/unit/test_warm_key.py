"""Which pools leave warm workers, and what a warm worker must match to serve another command."""

from __future__ import annotations

from ecdysis.rollouts import RolloutSettings
from ecdysis.rollouts.warm import keeps_warm, warm_key


def test_only_a_joined_cluster_without_custom_resources_keeps_workers_warm() -> None:
    settings = RolloutSettings(sandbox={"type": "process"})
    assert keeps_warm(settings, joined=True)
    assert not keeps_warm(settings, joined=False)
    assert not keeps_warm(settings.model_copy(update={"keep_warm_s": 0.0}), joined=True)
    assert not keeps_warm(settings.model_copy(update={"worker_resources": {"rollout": 1.0}}), joined=True)


def test_the_key_follows_the_settings_and_the_forwarded_environment() -> None:
    settings = RolloutSettings(sandbox={"type": "process"})
    env = {"OPENAI_API_KEY": "sk-one"}
    key = warm_key(settings, env)
    assert warm_key(RolloutSettings(sandbox={"type": "process"}), dict(env)) == key
    assert warm_key(settings.model_copy(update={"episodes_per_worker": 9}), env) != key
    assert warm_key(settings, {"OPENAI_API_KEY": "sk-two"}) != key
    assert "sk-one" not in key and len(key) == 20
