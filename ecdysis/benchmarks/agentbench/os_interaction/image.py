"""The task image ``ecdysis-agentbench-os:local``, built offline by ``build-image.sh`` beside this module."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError

IMAGE = "ecdysis-agentbench-os:local"
BUILD_SCRIPT = Path(__file__).with_name("build-image.sh")
_build_lock = threading.Lock()


def image_exists(client: Any, image: str = IMAGE) -> bool:
    """Whether the daemon has ``image``."""
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(client: Any = None, image: str = IMAGE, *, timeout_s: float = 1800) -> None:
    """Build ``image`` with ``build-image.sh`` when the daemon lacks it (minutes, once per machine: debootstrap
    needs root and a Debian mirror). Raises EnvironmentSetupError when it is still missing afterwards."""
    import docker

    try:
        client = client or docker.from_env()
        if image_exists(client, image):
            return
    except Exception as exc:  # docker's own errors, or the connection's (requests) when no daemon listens
        raise EnvironmentSetupError(f"no Docker daemon answers: {exc}") from exc
    with _build_lock:
        if image_exists(client, image):
            return
        env = {**os.environ, "ECDYSIS_AGENTBENCH_OS_IMAGE": image}
        try:
            done = subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentSetupError(f"building the task image {image} failed: {exc}") from exc
        if done.returncode != 0 or not image_exists(client, image):
            tail = (done.stdout + done.stderr).strip()[-2000:]
            raise EnvironmentSetupError(f"the task image {image} is missing and {BUILD_SCRIPT} could not build it "
                                        f"(exit status {done.returncode}): {tail}")
