from pathlib import Path

import pytest

from ecdysis.config import BUILTIN_CONFIGS, load_config


@pytest.mark.parametrize("path", sorted(p for p in BUILTIN_CONFIGS.glob("*.yaml") if not p.stem.startswith("study-")),
                         ids=lambda p: p.stem)
def test_builtin_configs_are_valid(path: Path) -> None:
    config = load_config(path)
    assert config.run_name and config.models.task


@pytest.mark.parametrize("path", sorted(BUILTIN_CONFIGS.glob("study-*.yaml")), ids=lambda p: p.stem)
def test_builtin_studies_are_valid(path: Path) -> None:
    from ecdysis.study import ALL_CONFIGURATIONS, load_study

    study = load_study(path)
    assert sorted(study.configurations) == sorted(ALL_CONFIGURATIONS)
    assert study.base.training.acceptance.type == "paired"
    assert study.table_order == list(ALL_CONFIGURATIONS)  # run in any order, tabled in the paper's


def test_builtin_configs_present() -> None:
    assert {p.stem for p in BUILTIN_CONFIGS.glob("*.yaml")} >= {"demo", "scripted", "airline"}
