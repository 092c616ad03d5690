"""An external coding-agent CLI run over a bundle copy in a bubblewrap sandbox with no network.

Inside the sandbox (its own user, pid, net, ipc and uts namespaces; only ``lo`` exists) the root is an empty,
read-only tmpfs holding read-only binds of ``/usr`` (with the host's ``/bin``, ``/lib``... links), the CLI's install
folder, a control folder at ``/ecdysis`` (the relay, the prompt, the CLI's config files, the proxy's socket) and a
made-up ``/etc`` (a passwd entry, ``localhost``). Writable: the bundle copy at ``/work/bundle`` (the working folder),
and a fresh HOME (XDG folders inside) and ``/tmp`` that are thrown away after the run. No host home, no ``/etc``, no
store, no provider key: the CLI's one way out is ``cli_relay.py`` (127.0.0.1:PORT → the socket) to a
:class:`~ecdysis.coders.gateway_proxy.GatewayProxy`, which answers through our gateway as ``role=CODER``.

The agent's report is not trusted: the result is the bundle as the run left it (the training loop diffs, validates
and evaluates it like the built-in agent's). A run that times out or crashes, or that leaves a link or anything but
plain files in the bundle, raises :class:`CodingAgentFailed`; the loop rejects that round's candidate with its message.

>>> agent = SandboxedCLIAgent(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:opencode_coder",
...                           OpenCodeConfig())                                            # doctest: +SKIP
>>> agent.apply(spec, private_copy, run_id="r1", round=0)                                  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ecdysis.coders.gateway_proxy import GatewayProxy
from ecdysis.coders.prompts import render
from ecdysis.harness import file_names as bundle_files
from ecdysis.protocols import LLMClient
from ecdysis.records import ModificationSpec, Role
from ecdysis.sandbox.allowlist import HIDDEN_PROC_FILES
from ecdysis.sandbox.cgroups import SandboxCgroup
from ecdysis.sandbox.errors import SandboxUnavailable
from ecdysis.sandbox.keyrings import filter_fd
from ecdysis.sandbox.launch import command as launcher
from ecdysis.sandbox.spawner import spawner

RELAY_SOURCE = Path(__file__).resolve().parent / "cli_relay.py"
RELAY_PORT = 8765
WORKDIR = "/work/bundle"
CONTROL = "/ecdysis"
HOME = "/home/agent"
AGENT_UID = 65532
PROMPT_FILES_BUDGET = 60_000
"""Characters of bundle file text put in the prompt (the CLIs can read more themselves)."""
STATE_NAMES = (".opencode", ".aider.tags.cache.v4", ".aider.chat.history.md", ".aider.input.history")
"""CLI state a run may leave in the working folder; removed from the bundle after the run."""


class CodingAgentFailed(Exception):
    """The external agent's run ended so that its bundle is not taken: timeout, crash, or a write that left the
    bundle's plain files."""


@dataclass(frozen=True)
class Invocation:
    """How one CLI runs inside the sandbox."""

    argv: list[str]
    """The command, run by ``sh`` in ``/work/bundle`` (the prompt is ``$(cat /ecdysis/prompt.md)``)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment (the sandbox starts from an empty one)."""
    files: dict[str, str] = field(default_factory=dict)
    """Control files written to ``/ecdysis/<name>`` (read-only inside)."""
    binds: list[str] = field(default_factory=list)
    """Host folders bound read-only at the same path (the CLI's install, its interpreter)."""
    stdin: str = "/dev/null"
    """What the command reads on stdin (a path inside the sandbox)."""


class ExternalAgentConfig(Protocol):
    """What :class:`SandboxedCLIAgent` needs from an external agent's config."""

    @property
    def type(self) -> str: ...

    @property
    def timeout_s(self) -> float: ...

    @property
    def memory_mb(self) -> int: ...

    def invocation(self, *, port: int, token: str, files: list[str]) -> Invocation:
        """The CLI's command, environment, control files and binds for a bundle holding ``files``."""
        ...

    def installed(self) -> str | None:
        """None when the CLI is installed, else why not (and how to install it)."""
        ...


@dataclass
class CLIRun:
    """How one sandboxed CLI run went (for notes, tests and the bench)."""

    exit_code: int | None
    """None: killed at its time limit."""
    wall_s: float
    startup_s: float | None
    """Seconds from the start to the CLI's first request to the proxy (None: it made none)."""
    peak_memory_bytes: int | None
    """Peak resident memory of the sandbox's largest process (the CLI), from ``wait4``."""
    requests: list[dict[str, Any]]
    """The proxy's log, one entry per request."""
    output: str
    """The tail of the CLI's stdout and stderr."""
    changed: list[str] = field(default_factory=list)
    """Bundle files the run added, changed or removed."""


def bwrap_argv(bwrap: str, control: Path, bundle: Path, home: Path, tmp: Path, invocation: Invocation,
               script: str, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line (see the module doc); ``seccomp_fd``: where bubblewrap reads the keyring filter
    (:func:`ecdysis.sandbox.keyrings.filter_fd`)."""
    # --as-pid-1: the script is the namespace's init, no bubblewrap monitor; a monitor would be a process of the
    # sandbox's user holding bubblewrap's own environment and command line (/proc/1/environ, /proc/1/cmdline).
    argv = [bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--clearenv"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--ro-bind", "/usr", "/usr"]
    # The sandbox's own folders before the CLI's install: a later mount hides what an earlier one put beneath it,
    # and an install in a clone under /tmp (or /home) would vanish under the run's fresh /tmp (or HOME).
    argv += ["--ro-bind", str(control), CONTROL, "--ro-bind", str(control / "etc"), "/etc",
             "--bind", str(bundle), WORKDIR, "--bind", str(home), HOME, "--bind", str(tmp), "/tmp"]
    for path in invocation.binds:
        argv += ["--ro-bind", path, path]
    for path in foreign_packages(invocation.binds):
        argv += ["--tmpfs", path]
    argv += ["--proc", "/proc", *HIDDEN_PROC_FILES, "--dev", "/dev", "--remount-ro", "/", "--chdir", WORKDIR]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "USER": "agent", "XDG_CONFIG_HOME": f"{HOME}/.config", "XDG_DATA_HOME": f"{HOME}/.local/share",
           "XDG_STATE_HOME": f"{HOME}/.local/state", "XDG_CACHE_HOME": f"{HOME}/.cache", "TERM": "dumb",
           "NO_COLOR": "1", **invocation.env}
    for name, value in env.items():
        argv += ["--setenv", name, value]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "/bin/sh", "-c", script]


HOST_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The whole environment bubblewrap (and the launcher before it) starts with: none of the host's variables (provider
keys) reaches any process of the run; the CLI's own comes from ``--setenv``."""


def shell_script(command: list[str], port: int, stdin: str = "/dev/null") -> str:
    """Start the relay, wait until it listens, run ``command`` in the bundle with stdin from ``stdin``."""
    relay = f"/usr/bin/python3 -I -S {CONTROL}/cli_relay.py {port} {CONTROL}/sock/proxy.sock"
    return (f"{relay} > /tmp/.relay.log 2>&1 &\n"
            "for i in $(seq 100); do grep -q ready /tmp/.relay.log 2>/dev/null && break; sleep 0.05; done\n"
            f"{' '.join(command)} < {stdin}\n")


def _snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``root``: its kind (file, dir, link, other) and, for files, its bytes."""
    entries: dict[str, tuple[str, bytes]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            entries[rel] = ("link", os.readlink(path).encode())
        elif stat.S_ISDIR(mode):
            entries[rel] = ("dir", b"")
        elif stat.S_ISREG(mode):
            entries[rel] = ("file", path.read_bytes())
        else:
            entries[rel] = ("other", b"")
    return entries


def _etc(folder: Path) -> None:
    folder.mkdir()
    (folder / "passwd").write_text(f"agent:x:{AGENT_UID}:{AGENT_UID}:agent:{HOME}:/bin/sh\n")
    (folder / "group").write_text(f"agent:x:{AGENT_UID}:\n")
    (folder / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    (folder / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> tuple[int | None, int | None]:
    """(exit code or None at the time limit, peak RSS bytes) of ``process``, reaped here with ``wait4``."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, int(usage.ru_maxrss) * 1024
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            return None, int(usage.ru_maxrss) * 1024
        time.sleep(0.02)


def run_cli(llm: LLMClient, model: str, config: ExternalAgentConfig, bundle_dir: Path, prompt: str, *,
            context: dict[str, Any] | None = None, bwrap: str = "bwrap") -> CLIRun:
    """Run the CLI of ``config`` once over ``bundle_dir`` (edited in place) behind a proxy for ``model``."""
    found = shutil.which(bwrap)
    if found is None:
        raise CodingAgentFailed(f"bubblewrap ({bwrap!r}) is not installed; run `make setup`")
    why = config.installed()
    if why is not None:
        raise CodingAgentFailed(why)
    bundle_dir = bundle_dir.resolve()
    token = secrets.token_hex(16)
    invocation = config.invocation(port=RELAY_PORT, token=token, files=bundle_files(bundle_dir))
    with tempfile.TemporaryDirectory(prefix=f"ecdysis-{config.type}-") as scratch:
        control, home, tmp = Path(scratch) / "control", Path(scratch) / "home", Path(scratch) / "tmp"
        for folder in (control, control / "sock", home, tmp):
            folder.mkdir()
        _etc(control / "etc")
        for name, text in {**invocation.files, "prompt.md": prompt,
                           "cli_relay.py": RELAY_SOURCE.read_text()}.items():
            (control / name).write_text(text, encoding="utf-8")
        proxy = GatewayProxy(llm, model, role=Role.CODER, unix_socket=control / "sock" / "proxy.sock",
                             context=context, token=token)
        before = _snapshot(bundle_dir)
        started = time.monotonic()
        with proxy:
            cgroup = _cgroup(config)
            try:
                seccomp = filter_fd()
                argv = bwrap_argv(found, control, bundle_dir, home, tmp, invocation,
                                  shell_script(invocation.argv, RELAY_PORT, invocation.stdin), seccomp_fd=seccomp)
                if cgroup is not None:
                    argv = launcher(sys.executable, {"cgroups": cgroup.procs_files, "home": "/"}, *argv)
                # From the spawner: a fresh session keyring, and --die-with-parent tied to a thread that lives on.
                try:
                    process = spawner().spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, start_new_session=True, env=HOST_ENV,
                                              pass_fds=(seccomp,))
                finally:
                    os.close(seccomp)
                output = _drain(process)
                exit_code, peak = _wait(process, config.timeout_s)
                wall = time.monotonic() - started
                if cgroup is not None:
                    peak = cgroup.peak_memory_bytes() or peak
                    if cgroup.oom_killed() and exit_code is not None:
                        output.append(f"\n{config.type} was killed for memory ({config.memory_mb} MB)".encode())
            finally:
                if cgroup is not None:
                    cgroup.destroy()
        if proxy.refused is not None:
            raise proxy.refused  # the model cannot be used: the run stops (not a rejected candidate)
        first = proxy.first_request_at
        startup = None if first is None else max(0.0, first - started)
        text = b"".join(output).decode(errors="replace")[-20_000:]
        run = CLIRun(exit_code=exit_code, wall_s=wall, startup_s=startup, peak_memory_bytes=peak,
                     requests=list(proxy.log), output=text)
    for name in STATE_NAMES:
        state = bundle_dir / name
        if state.is_dir() and not state.is_symlink():
            shutil.rmtree(state, ignore_errors=True)
        elif state.exists() or state.is_symlink():
            state.unlink()
    after = _snapshot(bundle_dir)
    run.changed = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))
    return run


def _cgroup(config: ExternalAgentConfig) -> SandboxCgroup | None:
    """A cgroup capping the run's memory and processes, where cgroups can be made (root); else None (no cap)."""
    if os.geteuid() != 0:
        return None
    try:
        return SandboxCgroup.create(f"coder-{uuid.uuid4().hex[:12]}", memory_bytes=config.memory_mb << 20, pids=512,
                                    cpus=float(os.cpu_count() or 1))
    except SandboxUnavailable:
        return None


def _drain(process: subprocess.Popen[bytes]) -> list[bytes]:
    """Collect the process's output in a thread (a full pipe would stall it); the list fills as it runs."""
    chunks: list[bytes] = []
    assert process.stdout is not None
    fd = process.stdout.fileno()

    def read() -> None:
        total = 0
        while data := os.read(fd, 65536):
            chunks.append(data)
            total += len(data)
            while total > 200_000 and len(chunks) > 1:
                total -= len(chunks.pop(0))

    threading.Thread(target=read, daemon=True).start()
    return chunks


def bundle_prompt(spec: ModificationSpec, bundle_dir: Path, round: int) -> str:
    """The coder's instructions for an external CLI: the built-in agent's prompts, the bundle's files with their
    absolute paths in the sandbox, and (up to :data:`PROMPT_FILES_BUDGET` characters) their current text."""
    names = bundle_files(bundle_dir)
    listing = "\n".join(f"- {WORKDIR}/{name}" for name in names)
    shown, budget = [], PROMPT_FILES_BUDGET
    for name in names:
        text = (bundle_dir / name).read_text(encoding="utf-8", errors="replace")
        if len(text) > budget:
            break
        budget -= len(text)
        shown.append(f"BUNDLE_FILE {name} BEGIN\n{text}\nBUNDLE_FILE {name} END")
    files = listing + ("\n\nCurrent contents:\n" + "\n".join(shown) if shown else "")
    return render("coder_system") + "\n\n" + render("coder_task", round=round,
                                                     spec_json=spec.model_dump_json(indent=1), files=files)


class SandboxedCLIAgent:
    """:class:`ecdysis.protocols.CodingAgent` that runs an external CLI (see the module doc)."""

    def __init__(self, llm: LLMClient, model: str, config: ExternalAgentConfig) -> None:
        self.llm = llm
        self.model = model
        self.config = config
        self.last_run: CLIRun | None = None
        """How the CLI's last run went."""

    def apply(self, spec: ModificationSpec, bundle_dir: Path, *, run_id: str, round: int) -> Path:
        """Run the CLI over ``bundle_dir``; raises :class:`CodingAgentFailed` when its result is not to be taken."""
        name = self.config.type
        if (bundle_dir / ".opencode").exists():
            raise CodingAgentFailed("the bundle holds .opencode/, which makes OpenCode install plugins; remove it")
        prompt = bundle_prompt(spec, bundle_dir, round)
        context = {"run_id": run_id, "round": round, "spec_id": spec.spec_id, "agent": name,
                   "call": uuid.uuid4().hex[:8]}
        run = run_cli(self.llm, self.model, self.config, bundle_dir, prompt, context=context)
        self.last_run = run
        last_line = next((line for line in reversed(run.output.strip().splitlines()) if line.strip()), "no output")
        if run.exit_code is None:
            raise CodingAgentFailed(f"{name} timed out after {self.config.timeout_s:.0f} s "
                                    f"({len(run.requests)} requests to the proxy)")
        if run.exit_code != 0:
            raise CodingAgentFailed(f"{name} exited with code {run.exit_code}: {last_line[:300]}")
        strange = [rel for rel in run.changed if _strange(bundle_dir / rel)]
        if strange:
            raise CodingAgentFailed(f"{name} left links or special files in the bundle (writes outside it are not "
                                    f"taken): {', '.join(strange[:5])}")
        return bundle_dir


def _strange(path: Path) -> bool:
    """A link, or something that is neither a plain file nor a folder."""
    if path.is_symlink():
        return True
    return path.exists() and not (path.is_file() or path.is_dir())


PACKAGE_FOLDERS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
                   "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages")
"""Where a Python installation keeps its packages, relative to its prefix."""


def foreign_packages(binds: list[str]) -> list[str]:
    """Package folders of the host's Pythons (in ``/usr`` and any bound base interpreter) that the sandbox covers
    with an empty tmpfs. A system-wide install of the project (as the top-level Dockerfile makes) puts τ²'s
    ``tasks.json``, with its gold actions, in such a folder, and a coding agent that could read it could write the
    answers into the harness. A virtual environment's own packages (the agent's install) stay visible."""
    found: list[str] = []
    for prefix in map(Path, ["/usr", *binds]):
        if (prefix / "pyvenv.cfg").is_file():
            continue
        for pattern in PACKAGE_FOLDERS:
            found += [str(p) for p in sorted(prefix.glob(pattern)) if p.is_dir() and not p.is_symlink()]
    return list(dict.fromkeys(found))


def python_prefix(python: Path) -> list[str]:
    """The host folders a virtual environment's interpreter needs inside the sandbox: the venv and its base
    installation (``home`` in ``pyvenv.cfg``)."""
    venv = python.parent.parent
    folders = [str(venv.resolve())]
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                base = Path(value.strip()).resolve().parent
                if not str(base).startswith("/usr"):
                    folders.append(str(base))
    return folders


__all__ = ["CLIRun", "CodingAgentFailed", "ExternalAgentConfig", "Invocation", "SandboxedCLIAgent", "bundle_prompt",
           "foreign_packages", "python_prefix", "run_cli"]
