"""Seed harness bundles (each folder is a self-contained, stdlib-only bundle; see sandbox/PROTOCOL.md).

- ``noop``: greets and ends at once (the benchmark's floor);
- ``direct``: a minimal τ²-style agent loop;
- ``human``: the hand-improved harness every evolution method starts from.
"""

from __future__ import annotations

from pathlib import Path

SEED_HARNESSES = ("noop", "direct", "human")
HARNESSES_DIR = Path(__file__).resolve().parent


def seed_harness_dir(name: str) -> Path:
    """The bundle folder of the seed harness ``name``."""
    if name not in SEED_HARNESSES:
        raise ValueError(f"unknown seed harness {name!r}; known: {', '.join(SEED_HARNESSES)}")
    return HARNESSES_DIR / name
