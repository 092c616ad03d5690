from pathlib import Path

import pytest

from ecdysis.cli.train_cmd import BUILTIN_CONFIGS
from ecdysis.config import load_config


@pytest.mark.parametrize("path", sorted(BUILTIN_CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_builtin_configs_are_valid(path: Path) -> None:
    config = load_config(path)
    assert config.run_name and config.models.task


def test_builtin_configs_present() -> None:
    assert {p.stem for p in BUILTIN_CONFIGS.glob("*.yaml")} >= {"demo", "scripted", "airline"}
