"""Removing a container so that a slow daemon never fails the caller: the engine may take longer to remove a
container than the client waits for its answer (on btrfs, dropping a container's quota group after it wrote
hundreds of megabytes took over a minute on a loaded machine), and the removal carries on in the daemon after the
client stops waiting. A caller that removes at the end of an episode must not turn that into an error.

>>> remove_container(client, container_id)    # doctest: +SKIP
True
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

REMOVE_WAIT_S = 180.0
"""How long to wait, after the client's own time-out, for the daemon to finish a removal it is still working on."""
_POLL_S = 1.0


def remove_container(client: Any, container_id: str, *, wait_s: float = REMOVE_WAIT_S) -> bool:
    """Force-remove the container and its anonymous volumes; True once it is gone (a missing one is gone).

    A removal the daemon already runs (another thread's) is waited for like one of ours. When the daemon does not
    answer in the client's time-out, this polls for up to ``wait_s`` seconds until the container has gone, asks once
    more, and otherwise logs and returns False: the container keeps its owner label, so the orphan sweep of a later
    process removes it. Any other engine error is raised (``docker.errors.APIError``).
    """
    import docker.errors
    import requests.exceptions

    try:
        client.api.remove_container(container_id, force=True, v=True)
        return True
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if "is already in progress" not in str(exc):
            raise
        why = "another removal of it is in progress"
    except requests.exceptions.RequestException as exc:  # the client's read time-out: the daemon works on
        why = f"the daemon did not answer in time ({exc.__class__.__name__})"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _exists(client, container_id):
            return True
        time.sleep(_POLL_S)
    try:
        client.api.remove_container(container_id, force=True, v=True)
        return True
    except docker.errors.NotFound:
        return True
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        log.warning("container %s is not removed (%s; then %s): the orphan sweep of a later process removes it",
                    container_id[:12], why, exc)
        return False


def _exists(client: Any, container_id: str) -> bool:
    import docker.errors
    import requests.exceptions

    try:
        client.api.inspect_container(container_id)
    except docker.errors.NotFound:
        return False
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return True  # the daemon is still busy: ask again
    return True
