"""The cluster manifests stay valid: Ray's own schema for the launcher config, and entrypoints our CLI accepts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
IMAGE_ROOT = "/opt/ecdysis/"  # WORKDIR of the top-level Dockerfile, which copies the repo's ecdysis/ there


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "cluster" / name).read_text())


def _train_command() -> Any:
    import typer

    from ecdysis.cli.main import app

    return typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]


def _check_entrypoint(line: str) -> dict[str, Any]:
    """Parse an ``ecdysis train ...`` line with the real CLI's parser; its config must exist and validate."""
    from ecdysis.config import load_config

    words = shlex.split(line)
    assert words[:2] == ["ecdysis", "train"], line
    context = _train_command().make_context("train", words[2:], resilient_parsing=False)
    params = dict(context.params)
    config_path = str(next(v for v in params.values() if isinstance(v, str) and v.endswith(".yaml")))
    assert config_path.startswith(IMAGE_ROOT), config_path
    load_config(REPO / config_path.removeprefix(IMAGE_ROOT))
    assert str(params["store"]).startswith("s3://") and params["ray_address"] == "auto"
    return params


def test_ray_launcher_config_passes_rays_own_schema() -> None:
    from ray.autoscaler._private.commands import prepare_config
    from ray.autoscaler._private.util import validate_config

    config = _load("ray-cluster.yaml")
    validate_config(prepare_config(config))
    assert "-v /var/run/docker.sock:/var/run/docker.sock" in config["docker"]["run_options"]
    typo = {**config, "min_workerz": 1}
    with pytest.raises(Exception, match="min_workerz"):
        validate_config(prepare_config(typo))
    comment = (REPO / "cluster" / "ray-cluster.yaml").read_text().split("ecdysis train", 1)[1].split("\n")[0]
    _check_entrypoint("ecdysis train" + comment)


def test_rayjob_runs_a_train_command_our_cli_accepts_on_the_installed_ray() -> None:
    import ray

    job = _load("rayjob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    params = _check_entrypoint(job["spec"]["entrypoint"])
    assert params["method"] == "ecdysis-fdcr"
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == ray.__version__
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    workers = [c for g in cluster["workerGroupSpecs"] for c in g["template"]["spec"]["containers"]
               if c["name"] == "ray-worker"]
    assert workers and all(w["image"] == head["image"] for w in workers)
    for container in [head, *workers]:  # keys come from a secret, never from the manifest
        assert not any(e["name"].endswith("_API_KEY") for e in container.get("env", []))


def test_an_unknown_option_in_an_entrypoint_is_refused() -> None:
    with pytest.raises(Exception, match="--methd") as refused:
        _check_entrypoint("ecdysis train /opt/ecdysis/ecdysis/configs/airline.yaml --methd se --ray-address auto "
                          "--store s3://b/p")
    assert type(refused.value).__name__ == "NoSuchOption"
