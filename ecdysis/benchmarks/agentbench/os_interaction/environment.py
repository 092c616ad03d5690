"""Task containers for OS-interaction episodes, and their grading.

``OSService`` (one per worker process, shared by its threads) checks the task image, hashes the grader's tools in
it, and opens episodes. ``OSEpisode`` is one task container: the task's init scripts and start script run when it
opens, the agent acts through ``call`` in one persistent shell, ``grade`` runs upstream's evaluation once the agent
has answered, and ``close`` removes the container.

Each container runs as root with a writable root file system (the tasks create users, change permissions and write
anywhere) but has no network, no Docker socket, no host paths, limits on memory, processes, CPU and file size, and
a disk quota where the daemon supports one (``disk_size``), and only these capabilities (Docker's default set minus
what no task needs):

* CHOWN, DAC_OVERRIDE, FOWNER, FSETID: root's usual power over files the tasks create, own, ``chmod`` and ``chown``
  (including set-uid/set-gid and sticky bits),
* SETUID, SETGID: ``su``/``runuser`` to the users the tasks create, and ``useradd``,
* KILL: signalling other users' processes (and stopping them when a command runs past its time limit).

Each is needed: without it ``useradd``, ``su``, ``runuser``, ``chown``, ``chmod`` of another user's file, ``chmod
g+s`` or ``pkill -u`` fails in a way some task depends on. Dropped: AUDIT_WRITE, MKNOD, NET_RAW, NET_BIND_SERVICE,
SETFCAP, SETPCAP, SYS_CHROOT. No new privileges can be gained through set-uid programs.

Where this differs from upstream, on purpose:

* A command past its time limit is stopped (upstream stopped waiting but left it running in the shell).
* The shell has no terminal: lines end in ``\n`` (not ``\r\n``), there are no prompts or echo, and programs that
  want a terminal say so.
* The task's example (the reference solution whose output is the expected answer) does not run in the agent's
  container after the agent: its output is computed from the task as the setup left it, so nothing the agent did
  (deleting the data the example reads, a process that rewrites a tool between two execs) changes the expected
  answer. An example that plainly only reads (see ``reference``; 100 of the 114 std examples) runs in the agent's
  container right after setup, before the agent's first command (where the setup's processes and the agent's shell
  are there for ``ps`` to count); any other is run at grading in a fresh container of a snapshot committed right
  after setup (see ``snapshot``). Upstream re-reads the container after the agent: a task whose expected answer
  depended on what the agent changed would differ here (none of the std examples that only read does).
* Before a check that reads the container's state (a task asking to change the system), the container is killed
  from the host (``docker kill``: every process in it ends, however fast it forks), the tamper check runs on the
  stopped container (see ``integrity``: a tampered container grades 0), and the container is started again with
  nothing of the agent's running; the check then runs by absolute path with a fixed PATH and HOME, and five of
  upstream's checks are replaced by ones that read only what their task is about (see ``checks``). Upstream's
  grader would still see the agent's shell and what the setup started; no such check counts processes.
* The grader's scripts run with the system directories first on PATH and python isolated (``-I -S``).
* Every task runs in the one image (upstream's ``packages`` variant also had npm; one std task asks whether npm is
  installed, and its answer is computed here, in this image).
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.benchmarks.agentbench.os_interaction import snapshot, tools
from ecdysis.benchmarks.agentbench.os_interaction.dockerio import run_exec
from ecdysis.benchmarks.agentbench.os_interaction.grading import Grade, evaluate
from ecdysis.benchmarks.agentbench.os_interaction.image import IMAGE, ensure_image
from ecdysis.benchmarks.agentbench.os_interaction.integrity import Baseline, State, current_states, find_tampering
from ecdysis.benchmarks.agentbench.os_interaction.reference import read_only
from ecdysis.benchmarks.agentbench.os_interaction.shell import PersistentShell, ShellResult, ShellUnavailable
from ecdysis.benchmarks.agentbench.os_interaction.tasks import OSTask, Script
from ecdysis.sandbox.ownership import OWNER_LABEL, owner, owner_alive
from ecdysis.sandbox.removal import remove_container

log = logging.getLogger(__name__)

KIND_LABEL = "ecdysis.agentbench"
"""Every container of this module carries ``ecdysis.agentbench=os``."""
EPISODE_LABEL = "ecdysis.agentbench.episode"
"""``<hostname>:<pid>`` of the process that created the container, so a later service removes what a dead one left."""
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"]
OPEN_FILES = 1 << 20
"""Descriptor limit of a container, as Docker usually grants: one task's init writes ``echo 123321>file``, which
bash reads as a redirection of descriptor 123321."""
STOP_TIMEOUT_S = 30.0
"""How long a killed task container may take to stop before grading counts it as an infrastructure fault."""
GRADER_PATH = "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
GRADER_ENVIRONMENT = {"PATH": GRADER_PATH, "HOME": "/root"}
"""The grader's scripts' whole environment. ``HOME`` is fixed so that no check's ``~`` depends on how a daemon or
runtime finds it (runc reads the container's ``/etc/passwd``, which the agent may edit, when none is given; Docker
20.10 gave ``/root`` after the agent's ``usermod -d /tmp/h root``, measured)."""
"""PATH of the grader's scripts: the system directories first, so that nothing the agent installs shadows a tool the
example uses (the same directories as the container's PATH, so PATH-counting tasks are unaffected)."""


class OSService:
    """Opens task containers of one image. Thread-safe: episodes may be opened, driven and closed from any thread
    (each episode serialises its own calls)."""

    def __init__(self, docker_client: Any = None, image: str = IMAGE, *, command_timeout_s: float = 30.0,
                 setup_timeout_s: float = 120.0, check_timeout_s: float = 60.0, mem_limit: str = "1g",
                 pids_limit: int = 512, cpus: float = 1.0, max_file_bytes: int = 1 << 30,
                 disk_size: str | None = "2g") -> None:
        """Connect to Docker (``docker.from_env()`` unless a client is given), build the image if it is missing
        (see ``ensure_image``), hash the grader's tools in it and remove containers and snapshots that dead
        processes left. ``disk_size`` caps what a task container may write (``--storage-opt size``; None: no cap);
        a daemon that cannot enforce it gets one warning and containers without the cap.
        Raises EnvironmentSetupError when Docker or the image cannot be had."""
        import docker

        try:
            self.client = docker_client or docker.from_env(max_pool_size=64)
            self.client.ping()
        except Exception as exc:  # docker's own errors, or the connection's (requests) when no daemon listens
            raise EnvironmentSetupError(f"no Docker daemon answers: {exc}") from exc
        self.image = image
        self.command_timeout_s = command_timeout_s
        self.setup_timeout_s = setup_timeout_s
        self.check_timeout_s = check_timeout_s
        self._limits = {"mem_limit": mem_limit, "memswap_limit": mem_limit, "pids_limit": pids_limit,
                        "nano_cpus": int(cpus * 1e9)}
        self._fsize = docker.types.Ulimit(name="fsize", soft=max_file_bytes, hard=max_file_bytes)
        self.disk_size = disk_size
        """The disk quota task containers get, or None (none asked, or the daemon cannot enforce one)."""
        self.open_files: int | None = OPEN_FILES
        """The descriptor limit containers get: OPEN_FILES, or None (the daemon's own limit, lower) when the daemon
        cannot grant it."""
        ensure_image(self.client, image)
        with contextlib.suppress(Exception):
            self.remove_leftovers()
        try:
            self.baseline = Baseline.from_image(self.client, image, self._labels("baseline"))
        except docker.errors.DockerException as exc:
            raise EnvironmentSetupError(f"could not read the task image {image}: {exc}") from exc
        self._episodes: dict[str, OSEpisode] = {}
        self._lock = threading.Lock()

    def _labels(self, episode_id: str) -> dict[str, str]:
        return {"ecdysis": "1", KIND_LABEL: "os", EPISODE_LABEL: episode_id, OWNER_LABEL: owner()}

    def open(self, task: OSTask, episode_id: str) -> OSEpisode:
        """A fresh container for ``task``, set up (init, then start) and ready for the agent's first action.
        Raises ValueError for an unsupported task and EnvironmentSetupError when the container or the task's
        setup fails (an infrastructure fault: retry the episode)."""
        if task.unsupported:
            raise ValueError(f"task {task.task_id} cannot run here: {task.unsupported}")
        episode = OSEpisode(self, task, episode_id)
        with self._lock:
            self._episodes[episode.container_id] = episode
        return episode

    def _forget(self, episode: OSEpisode) -> None:
        with self._lock:
            self._episodes.pop(episode.container_id, None)

    def container_options(self, episode_id: str) -> dict[str, Any]:
        """The isolation and limits of every container of an episode (its task container and its snapshot's)."""
        import docker

        ulimits = [self._fsize]
        if self.open_files is not None:
            ulimits.append(docker.types.Ulimit(name="nofile", soft=self.open_files, hard=self.open_files))
        options = {"labels": self._labels(episode_id), "user": "root", "working_dir": "/root", "network_mode": "none",
                   "cap_drop": ["ALL"], "cap_add": CAPABILITIES, "security_opt": ["no-new-privileges:true"],
                   "stdin_open": False, "tty": False, "ulimits": ulimits, **self._limits}
        if self.disk_size is not None:
            options["storage_opt"] = {"size": self.disk_size}
        return options

    def _create_container(self, episode_id: str) -> Any:
        import docker

        safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", episode_id)[:40].strip("-.") or "episode"
        while True:
            asked, disk = self.open_files, self.disk_size
            name = f"ecdysis-os-{safe}-{secrets.token_hex(4)}"
            try:
                return self.client.containers.run(self.image, command=["/usr/bin/sleep", "infinity"], detach=True,
                                                  name=name, **self.container_options(episode_id))
            except docker.errors.APIError as exc:
                with contextlib.suppress(docker.errors.DockerException):
                    self.client.api.remove_container(name, force=True)  # created, but it could not start
                if disk is not None and _no_disk_quota(exc):
                    if self.disk_size is not None:
                        log.warning("the Docker daemon cannot cap a container's disk (%s): task containers run "
                                    "without a disk quota", str(exc).strip()[:300])
                    self.disk_size = None
                    continue
                if asked is None or "rlimit" not in str(exc):
                    raise
                if self.open_files is not None:
                    log.warning("the Docker daemon cannot grant %d open files (its own limit is lower): task "
                                "containers keep its default, so std-004-Q09-00000's init (echo 123321>file) fails",
                                asked)
                self.open_files = None

    def remove_leftovers(self, *, everything: bool = False) -> int:
        """Remove this module's containers and snapshot images whose creating process on this host is gone (all of
        them with ``everything``); returns how many were removed."""
        import docker.errors

        removed = 0
        for summary in self.client.api.containers(all=True, filters={"label": f"{KIND_LABEL}=os"}):
            if not everything and owner_alive(summary.get("Labels", {}).get(OWNER_LABEL, "")):
                continue
            with contextlib.suppress(docker.errors.NotFound):
                self.client.api.remove_container(summary["Id"], force=True)
                removed += 1
        return removed + snapshot.remove_leftover_images(self.client, everything=everything)

    def close(self) -> None:
        """Close every episode this service opened that is still open."""
        with self._lock:
            episodes = list(self._episodes.values())
        for episode in episodes:
            episode.close()


class OSEpisode:
    """One task container and the agent's shell in it. Use from one thread at a time; ``close`` may come from
    any thread at any time (a running command then ends with an error)."""

    def __init__(self, service: OSService, task: OSTask, episode_id: str) -> None:
        import docker.errors

        self.service = service
        self.task = task
        self.episode_id = episode_id
        self.finished = False
        """Set once the agent calls ``answer_action`` or ``finish_action``."""
        self.answer: str | None = None
        """What upstream grades: the answer, or ``finish_action``'s thought."""
        self.command_timeout_s = service.command_timeout_s
        """Time limit of one ``bash_action`` (the service's, unless changed for this episode)."""
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closed = False
        self._grade: Grade | None = None
        self.container_id = ""
        self.shell: PersistentShell | None = None
        self._snapshot: str | None = None  # the image of the container as the setup left it
        self._reference: tuple[int | None, str] | None = None  # the example's result, run before the agent acted
        self._allowed: dict[str, State | None] = {}
        client = service.client
        started = time.monotonic()
        try:
            container = service._create_container(episode_id)
            self.container_id = container.id
            # As upstream: the shell first, then init scripts as separate processes, then start in the shell.
            self.shell = PersistentShell(client, self.container_id)
            for position, script in enumerate(task.init, start=1):
                self._setup_script(script, position)
            if task.start is not None:
                result = self.shell.run(task.start.code or "", service.setup_timeout_s)
                if result.exit_code != 0:
                    raise EnvironmentSetupError(
                        f"task {task.task_id}: its start script failed ({_status(result)}): {_tail(result.output)}")
            self._prepare_grading()
        except BaseException as exc:
            self.close()
            if isinstance(exc, EnvironmentSetupError):
                raise
            if isinstance(exc, docker.errors.DockerException | ShellUnavailable | OSError):
                raise EnvironmentSetupError(f"task {task.task_id}: could not prepare its container: {exc}") from exc
            raise
        self.setup_seconds = time.monotonic() - started
        """How long creating and setting up the container took."""

    def _prepare_grading(self) -> None:
        """Before the agent's first command: what grading needs of the container as the setup left it."""
        gold = self.task.gold
        if gold.check is None:
            return
        if None in gold.check and gold.example is not None:
            if read_only(gold.example):
                self._reference = self._run_check(gold.example, [])
            else:
                self._snapshot = snapshot.take(self.service.client, self.container_id,
                                               self.service._labels(self.episode_id))
        if any(_in_container(item) for item in gold.check):
            self._allowed = current_states(self.service.client, self.container_id, self.service.baseline)

    def _setup_script(self, script: Script, position: int) -> None:
        result = run_exec(self.service.client, self.container_id, _command(script, []),
                          timeout=self.service.setup_timeout_s)
        if result.exit_code != 0:
            what = "ran past its time limit" if result.timed_out else f"exited with status {result.exit_code}"
            raise EnvironmentSetupError(f"task {self.task.task_id}: init script {position} {what}: "
                                        f"{_tail(result.stderr or result.stdout)}")

    # -- the agent's side ---------------------------------------------------------------------------------------

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of ``bash_action``, ``finish_action`` and ``answer_action``."""
        return tools.tool_schemas()

    def call(self, name: str, arguments: Mapping[str, Any] | str | None) -> tuple[str, bool]:
        """Run one tool call; returns (content for the agent, whether it was an error). Never raises for what the
        agent sends. ``answer_action`` and ``finish_action`` end the episode (``finished``)."""
        with self._lock:
            if self._closed:
                return "The OS environment has been closed.", True
            if self.finished:
                return "The task has already ended; no more actions are taken.", True
            if name not in (tools.BASH, tools.ANSWER, tools.FINISH):
                return tools.INVALID_CALL, True
            try:
                args = tools.parse_arguments(arguments)
            except ValueError as exc:
                return f"Invalid arguments for {name}: {exc}", True
            if name == tools.BASH:
                script = tools.argument(args, "script")
                if not isinstance(script, str):
                    return 'Invalid arguments for bash_action: "script" must be a string.', True
                return self._bash(script)
            value = tools.argument(args, "answer" if name == tools.ANSWER else "thought")
            if name == tools.ANSWER and value is None:
                return 'Invalid arguments for answer_action: "answer" is required.', True
            self.answer = tools.as_text(value)
            self.finished = True
            return ("Your answer has been recorded." if name == tools.ANSWER else "The task is finished."), False

    def _bash(self, script: str) -> tuple[str, bool]:
        limit = self.command_timeout_s
        try:
            assert self.shell is not None
            result = self.shell.run(script, limit)
        except Exception as exc:  # the container or the daemon is gone: nothing the agent did can cause that
            if self._closed:
                return "The OS environment has been closed.", True
            log.warning("episode %s: the shell failed: %s", self.episode_id, exc)
            return f"The OS environment is unavailable: {exc}", True
        content = tools.format_output(result.output, cut=result.dropped_bytes > 0)
        if result.timed_out:
            content += f"\n[the command was stopped after {limit:g} seconds: time limit]"
        if result.restarted:
            content += "\n[the shell ended; a new shell was started as root in /root]"
        return content, False

    # -- grading ------------------------------------------------------------------------------------------------

    def grade(self) -> Grade:
        """Grade the episode as upstream does once the agent has ended (later calls return the same grade): the
        example in a snapshot taken before the agent acted, the task's own checks in this container once everything
        in it was stopped and its tools found intact. Raises EnvironmentSetupError when the container or Docker fails
        during grading (the container vanished, the daemon does not answer): never for what the agent did in it."""
        import docker.errors
        import requests

        with self._lock:
            if self._grade is not None:
                return self._grade
            if self._closed:
                raise EnvironmentSetupError(f"episode {self.episode_id} was closed before grading")
            if not self.finished:
                self._grade = Grade(0.0, {"answered": 0.0}, "the agent ended without answer_action or finish_action")
                return self._grade
            try:
                self._grade = self._grade_now()
            except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
                raise EnvironmentSetupError(f"grading episode {self.episode_id} failed: {exc}") from exc
            return self._grade

    def _grade_now(self) -> Grade:
        gold = self.task.gold
        if gold.check is not None and any(_in_container(item) for item in gold.check):
            problems = self._stop_and_inspect()
            breakdown = {"answered": 1.0, "untampered": 0.0 if problems else 1.0, "correct": 0.0}
            if problems:
                shown = "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else "")
                return Grade(0.0, breakdown, f"tampered: the grader's tools in the container were changed ({shown}); "
                                             "graded 0")
            if not self._restart():
                return Grade(0.0, breakdown, "the container could no longer be started for the grader; graded 0")
        else:  # graded on the answer and the example's output: nothing the agent left is involved
            breakdown = {"answered": 1.0, "correct": 0.0}
        ok, why = evaluate(gold, self.answer, self._grader_run)
        breakdown["correct"] = 1.0 if ok else 0.0
        return Grade(1.0 if ok else 0.0, breakdown, why)

    def _stop_and_inspect(self) -> list[str]:
        """Kill the container from the host (every process in it ends with its init, however fast it forks; the
        container cannot refuse), wait until it has stopped, then check the grader's tools in it."""
        import docker.errors

        client = self.service.client
        if self.shell is not None:
            self.shell.close()
        try:
            client.api.kill(self.container_id)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError:  # not running any more: fine, it is stopped either way
            pass
        try:
            client.api.wait(self.container_id, timeout=STOP_TIMEOUT_S)
        except docker.errors.NotFound:
            raise
        except Exception as exc:  # the daemon's read time-out: it did not stop in time
            raise EnvironmentSetupError(f"task container {self.container_id[:12]} did not stop: {exc}") from exc
        return find_tampering(client, self.container_id, self.service.baseline, self._allowed)

    def _restart(self) -> bool:
        """Start the stopped, untampered container again (only its ``sleep`` runs); False when it cannot start
        for a reason of its own (the agent made /root a file, say)."""
        import docker.errors

        try:
            self.service.client.api.start(self.container_id)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError as exc:  # the daemon answers, the container exists: what is in it is at fault
            log.info("episode %s: its container could not start for grading: %s", self.episode_id, exc)
            return False
        return True

    def _grader_run(self, script: Script, params: list[str]) -> tuple[int | None, str]:
        if script is self.task.gold.example:
            if self._reference is not None:
                return self._reference
            if self._snapshot is not None:
                return snapshot.run(self.service.client, self._snapshot, _command(script, params),
                                    timeout=self.service.check_timeout_s,
                                    options={**self.service.container_options(self.episode_id),
                                             "environment": GRADER_ENVIRONMENT})
        return self._run_check(script, params)

    def _run_check(self, script: Script, params: list[str]) -> tuple[int | None, str]:
        result = run_exec(self.service.client, self.container_id, _command(script, params),
                          timeout=self.service.check_timeout_s, environment=GRADER_ENVIRONMENT)
        return result.exit_code, result.stdout.decode("utf-8", "replace")

    # -- lifetime -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the container (idempotent, any thread)."""
        import docker.errors

        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.shell is not None:
            self.shell.close()
        if self.container_id:
            try:
                remove_container(self.service.client, self.container_id)
            except docker.errors.DockerException as exc:
                log.warning("could not remove task container %s: %s", self.container_id[:12], exc)
        if self._snapshot is not None:
            snapshot.drop(self.service.client, self._snapshot)
        self.service._forget(self)

    def __enter__(self) -> OSEpisode:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _command(script: Script, params: list[str]) -> list[str]:
    """The argv that runs ``script`` with ``params`` as upstream passes them (bash: ``$1...``, python:
    ``sys.argv[1:]``). Python runs isolated (-I -S): no site or user packages the agent could have planted."""
    code = script.code or ""
    if script.language == "python":
        return ["/usr/bin/python3", "-I", "-S", "-c", code, *params]
    return ["/usr/bin/bash", "-c", code, *(["--", *params] if params else [])]


def _in_container(item: Script | None) -> bool:
    """Whether a check item runs in the agent's container: a script of the task's own (not its example, not one of
    our host-side comparators)."""
    return item is not None and item.comparator is None


def _no_disk_quota(exc: Exception) -> bool:
    """Whether the daemon refused ``--storage-opt size`` (its storage driver or file system cannot enforce it)."""
    # not "quota exceeded": a size below the image's own (full btrfs qgroups count it) is a mistake
    text = str(exc).lower()
    return any(words in text for words in ("storage-opt", "storage opt", "storage option"))


def _status(result: ShellResult) -> str:
    return "time limit" if result.timed_out else f"exit status {result.exit_code}"


def _tail(data: bytes, size: int = 500) -> str:
    return data.decode("utf-8", "replace").strip()[-size:]
