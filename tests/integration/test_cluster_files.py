"""The cluster manifests stay valid: Ray's own schema for the launcher config, KubeRay's CRD schema (vendored in
cluster/schemas/) for the RayJob, and entrypoints our CLI accepts."""

from __future__ import annotations

import copy
import hashlib
import re
import shlex
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from crd_schema_support import load_strict_schema, strict_schema, validation_errors

REPO = Path(__file__).resolve().parents[2]
IMAGE_ROOT = "/opt/ecdysis/"  # WORKDIR of the top-level Dockerfile, which copies the repo's ecdysis/ there
SCHEMAS = REPO / "cluster" / "schemas"
RAYJOB_SCHEMA = SCHEMAS / "kuberay-rayjob-v1.schema.json"


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


@cache
def _rayjob_schema() -> dict[str, Any]:
    return load_strict_schema(RAYJOB_SCHEMA)


def test_rayjob_passes_kuberays_crd_schema() -> None:
    assert validation_errors(_load("rayjob.yaml"), _rayjob_schema()) == []


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def _rename(node: dict[str, Any], old: str, new: str) -> None:
    node[new] = node.pop(old)


WORKER_CONTAINER = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0]"
BROKEN_RAYJOBS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "rayjob-spec-field": (lambda job: _rename(job["spec"], "shutdownAfterJobFinishes", "shutdownAfterJobFinishez"),
                          "spec: Additional properties are not allowed ('shutdownAfterJobFinishez' was unexpected)"),
    "cluster-spec-field": (lambda job: _rename(job["spec"]["rayClusterSpec"], "rayVersion", "rayVersoin"),
                           "spec.rayClusterSpec: Additional properties are not allowed ('rayVersoin' was unexpected)"),
    "worker-group-field": (lambda job: _rename(_worker(job), "replicas", "replica"),
                           "spec.rayClusterSpec.workerGroupSpecs[0]: Additional properties are not allowed "
                           "('replica' was unexpected)"),
    "worker-container-field": (lambda job: _rename(_worker(job)["template"]["spec"]["containers"][0], "image",
                                                   "imagez"),
                               f"{WORKER_CONTAINER}: Additional properties are not allowed ('imagez' was unexpected)"),
    "env-var-field": (lambda job: _rename(_worker(job)["template"]["spec"]["containers"][0]["env"][0], "value",
                                          "valu"),
                      f"{WORKER_CONTAINER}.env[0]: Additional properties are not allowed ('valu' was unexpected)"),
    "ray-start-param-type": (lambda job: job["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"].update(
                                 {"num-cpus": 0}),
                             "spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus: 0 is not of type 'string'"),
    "replicas-type": (lambda job: _worker(job).update(replicas="4"),
                      "spec.rayClusterSpec.workerGroupSpecs[0].replicas: '4' is not of type 'integer'"),
    "quantity-pattern": (lambda job: _worker(job)["template"]["spec"]["containers"][0]["resources"]["requests"]
                         .update(memory="16 GB"),
                         f"{WORKER_CONTAINER}.resources.requests.memory: '16 GB' does not match"),
}


@pytest.mark.parametrize("case", list(BROKEN_RAYJOBS))
def test_a_wrong_field_in_the_rayjob_fails_kuberays_crd_schema(case: str) -> None:
    breaks, expected = BROKEN_RAYJOBS[case]
    job = copy.deepcopy(_load("rayjob.yaml"))
    breaks(job)
    errors = validation_errors(job, _rayjob_schema())
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_strict_crd_schema_handles_kubernetes_extensions() -> None:
    preserve = "x-kubernetes-preserve-unknown-fields"
    schema = strict_schema({"type": "object", "properties": {
        "port": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        "bare": {"x-kubernetes-int-or-string": True},
        "free": {"type": "object", "properties": {"n": {"type": "integer"}}, preserve: True},
        "anything": {preserve: True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "when": {"type": "string", "nullable": True},
        "pod": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"spec": {"type": "object"}}},
    }})
    good = {"port": 80, "bare": "http", "free": {"n": 1, "extra": [1]}, "anything": [{"x": None}], "labels": {"a": "b"},
            "when": None, "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}
    assert validation_errors(good, schema) == []
    assert validation_errors({**good, "port": 1.5, "bare": [], "free": {"n": "1"}, "labels": {"a": 1}, "pod": {"x": 1},
                              "typo": 1}, schema) == [
        "<root>: Additional properties are not allowed ('typo' was unexpected)",
        "bare: [] is not valid under any of the given schemas",
        "free.n: '1' is not of type 'integer'",
        "labels.a: 1 is not of type 'string'",
        "pod: Additional properties are not allowed ('x' was unexpected)",
        "port: 1.5 is not valid under any of the given schemas",
    ]


def test_vendored_crd_schema_is_the_one_its_notice_records() -> None:
    notice = (SCHEMAS / "NOTICE").read_text()
    recorded = re.search(r"sha256\(kuberay-rayjob-v1\.schema\.json\) = ([0-9a-f]{64})", notice)
    assert recorded, "cluster/schemas/NOTICE must record the vendored schema's sha256"
    assert hashlib.sha256(RAYJOB_SCHEMA.read_bytes()).hexdigest() == recorded.group(1), (
        "cluster/schemas/kuberay-rayjob-v1.schema.json differs from the upstream copy that NOTICE records")
    assert re.search(r"Commit: +[0-9a-f]{40}", notice) and "ray.io_rayjobs.yaml" in notice
    assert (SCHEMAS / "LICENSE-kuberay").read_text().split()[:3] == ["Apache", "License", "Version"]
    spec = _rayjob_schema()["properties"]["spec"]["properties"]
    assert {"entrypoint", "rayClusterSpec", "shutdownAfterJobFinishes"} <= set(spec)
