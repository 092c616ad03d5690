"""A real image registry on loopback (the CNCF distribution registry, Debian's ``docker-registry`` package), for
tests and local clusters. The Docker daemon treats registries on 127.0.0.0/8 as insecure-allowed, so no TLS is needed.

Example::

    with registry_server() as registry:      # "127.0.0.1:PORT"
        reference = publish_harness_image(client, bundle, digest, base, registry)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ecdysis.testing.processes import stop_process
from tests.services.s3 import free_port

START_TIMEOUT_S = 30.0
BINARY = "docker-registry"

_CONFIG = """\
version: 0.1
log: {{level: warn}}
storage:
  filesystem: {{rootdirectory: {root}}}
  delete: {{enabled: true}}
http:
  addr: {addr}
"""


def registry_binary() -> str | None:
    """The registry program, if installed (``apt-get install docker-registry``)."""
    return shutil.which(BINARY) or (f"/usr/bin/{BINARY}" if Path(f"/usr/bin/{BINARY}").exists() else None)


@contextlib.contextmanager
def registry_server(host: str = "127.0.0.1") -> Iterator[str]:
    """Serve a registry with its own empty storage on a free loopback port; yields ``host:port``; stops it and
    removes its storage on exit."""
    binary = registry_binary()
    if binary is None:
        raise RuntimeError(f"no {BINARY} program: apt-get install docker-registry")
    port = free_port(host)
    with tempfile.TemporaryDirectory(prefix="ecdysis-registry-") as folder:
        config = Path(folder) / "config.yml"
        config.write_text(_CONFIG.format(root=Path(folder) / "data", addr=f"{host}:{port}"))
        with open(Path(folder) / "log", "wb") as log:
            proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
            try:
                _wait_ready(proc, f"{host}:{port}", Path(folder) / "log")
                yield f"{host}:{port}"
            finally:
                stop_process(proc)


def _wait_ready(proc: subprocess.Popen[bytes], address: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{BINARY} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"http://{address}/v2/", timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{BINARY} did not answer on {address} within {START_TIMEOUT_S:.0f}s")


def registry_tags(address: str, repository: str) -> list[str]:
    """The tags the registry at ``address`` holds for ``repository`` (its HTTP API v2); [] when none."""
    try:
        with urllib.request.urlopen(f"http://{address}/v2/{repository}/tags/list", timeout=5) as response:
            return list(json.load(response).get("tags") or [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def manifest_digest(address: str, repository: str, tag: str) -> str:
    """The digest the registry serves for ``repository:tag`` (``Docker-Content-Digest`` of its manifest)."""
    request = urllib.request.Request(
        f"http://{address}/v2/{repository}/manifests/{tag}", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(response.headers["Docker-Content-Digest"])
