"""τ²-bench on the trusted side: domains, grading, the simulated user, scripted participants and one episode.

>>> from ecdysis.tau import TauDomain, select_tasks, run_episode, EpisodeRequest   # doctest: +SKIP
>>> tasks = select_tasks("airline", "train", n=20, seed=0)                       # doctest: +SKIP

Heavy parts (tau2, the sandbox driver, the gateway) are imported on first use.
"""

from ecdysis.tau.domain import DOMAINS, EpisodeEnv, TauDomain, TauDomainError, select_tasks
from ecdysis.tau.episode import EpisodeRequest, run_episode
from ecdysis.tau.grading import Grade, grade
from ecdysis.tau.user import STOP_TOKENS, UserReply, UserSimulator, UserSimulatorError

__all__ = [
    "DOMAINS",
    "STOP_TOKENS",
    "EpisodeEnv",
    "EpisodeRequest",
    "Grade",
    "TauDomain",
    "TauDomainError",
    "UserReply",
    "UserSimulator",
    "UserSimulatorError",
    "grade",
    "run_episode",
    "select_tasks",
]
