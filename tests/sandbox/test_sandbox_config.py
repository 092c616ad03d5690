"""Backend configs: strict fields, the section chosen by ``type`` through the registry, and the automatic choice."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from ecdysis.sandbox import (
    AutoSandboxConfig,
    DockerSandboxConfig,
    ProcessSandboxConfig,
    SandboxConfig,
    SandboxSection,
    docker_available,
    make_backend,
)

ADAPTER: TypeAdapter[SandboxSection] = TypeAdapter(SandboxConfig)


def test_union_picks_by_type() -> None:
    assert isinstance(ADAPTER.validate_python({"type": "docker", "mem_limit": "1g"}), DockerSandboxConfig)
    assert isinstance(ADAPTER.validate_python({"type": "process", "nproc": 8}), ProcessSandboxConfig)
    auto = ADAPTER.validate_python({"process": {"warm_pool": 0}})  # no type: auto
    assert isinstance(auto, AutoSandboxConfig) and auto.process.warm_pool == 0
    assert isinstance(ADAPTER.validate_python("process"), ProcessSandboxConfig)  # a bare name is {type: name}


def test_defaults_are_locked_down() -> None:
    config = DockerSandboxConfig()
    assert (config.network_mode, config.read_only, config.cap_drop, config.init) == ("none", True, ["ALL"], True)
    assert config.no_new_privileges and not config.user.startswith("0")


@pytest.mark.parametrize(("data", "path"), [
    ({"type": "docker", "mem_limt": "1g"}, "mem_limt"),
    ({"type": "process", "nproc": 1}, "nproc"),
    ({"type": "auto", "docker": {"pids_limit": "many"}}, "docker.pids_limit"),
    ({"type": "docker", "user": "0:0"}, "user"),  # a reused container's holder is root: never the harness
    ({"type": "kubernetes"}, "type"),
])
def test_bad_fields_are_named(data: dict[str, object], path: str) -> None:
    with pytest.raises(ValidationError) as info:
        ADAPTER.validate_python(data)
    locations = [".".join(str(part) for part in error["loc"]) for error in info.value.errors()]
    if path == "type":  # an unknown type is reported on the section itself, naming the known ones
        assert "unknown sandbox backend 'kubernetes'; known: auto, docker, process" in str(info.value)
    else:
        assert any(location.startswith(path) for location in locations), locations


def test_every_field_is_documented() -> None:
    import ast
    import inspect

    import ecdysis.sandbox.config as module

    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        body = node.body
        for index, statement in enumerate(body):
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                    and statement.target.id != "model_config":
                following = body[index + 1] if index + 1 < len(body) else None
                documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                assert documented, f"{node.name}.{statement.target.id} has no docstring"
    assert issubclass(DockerSandboxConfig, BaseModel)


def test_auto_picks_docker_when_a_daemon_answers() -> None:
    config = AutoSandboxConfig(docker=DockerSandboxConfig(warm_pool=0), process=ProcessSandboxConfig(warm_pool=0))
    backend = make_backend(config)
    try:
        expected = "DockerBackend" if docker_available() else "ProcessBackend"
        assert type(backend).__name__ == expected
    finally:
        backend.shutdown()


def test_auto_falls_back_to_process_without_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    config = AutoSandboxConfig(docker=DockerSandboxConfig(docker_host="unix:///nonexistent/docker.sock", warm_pool=0),
                               process=ProcessSandboxConfig(warm_pool=0))
    backend = make_backend(config)
    try:
        assert type(backend).__name__ == "ProcessBackend"
        assert "process sandbox" in capsys.readouterr().out
    finally:
        backend.shutdown()
