"""``ecdysis study``: the paper's comparison in miniature — ``direct``, ``human`` and the evolution methods trained
from ``human``, on one split, with one model, seed and budget; held-out scores with 95% intervals, a transfer table
across task models, checkpointed after every run (:mod:`ecdysis.study.manifest`)."""

from ecdysis.study.config import ALL_CONFIGURATIONS, StudyConfig, load_study, parse_study
from ecdysis.study.manifest import StudyEntry, StudyManifest, load_manifest
from ecdysis.study.runner import StudyRunner
from ecdysis.study.table import write_study

__all__ = ["ALL_CONFIGURATIONS", "StudyConfig", "StudyEntry", "StudyManifest", "StudyRunner", "load_manifest",
           "load_study", "parse_study", "write_study"]
