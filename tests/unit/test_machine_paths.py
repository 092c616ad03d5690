"""No file of the repository names a folder of one machine: data and tools are found through configuration, the
environment and the user's cache (``ecdysis.usercache``), never at an absolute path under ``/work``, ``/root``,
``/home/<user>``, ``/Users/<user>`` or a drive such as ``C:``.

The pattern only looks for those roots, so a path that belongs to a protocol and exists the same on every machine
(``/tmp``, ``/proc``, ``/sys``, ``/etc``, ``/usr``, ``/dev``, ``/harness``, ``/ecdysis`` inside a sandbox) never
matches. The few protocol paths that do share a root with a machine's folders are listed, each with its reason, in
:data:`PROTOCOL_PATHS`. Skipped: binary files, licences, vendored files and recorded replay packs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MACHINE_PATH = re.compile(
    r"(?<![\w./~$}\\-])"  # the start of an absolute path, not the tail of a longer one or of $HOME/~
    r"(?:/work/[\w.-]+"
    r"|/root/[\w.-]+"
    r"|/home/[\w.-]+/"
    r"|/Users/[\w.-]+"
    r"|(?<![\w\\])[A-Z]:(?:\\\\|\\(?![abfnrtvx0-7]))[A-Za-z])"  # C:\ or C:\\ in source, never an escape like \n
)
"""An absolute path under a root that holds one machine's own folders."""

PROTOCOL_PATHS = re.compile(
    r"/work/bundle\b"  # the coding agent's working folder inside its sandbox (sandbox/PROTOCOL.md)
    # inside an AgentBench OS task container: the files of root's home the tasks (and the attack tests) use ...
    r"|/root/(?:matrix\.txt|videos|big|many|mine)\b"
    r"|/home/(?:user1|user2|jack)/"  # ... and the homes of the users the tasks create
)
"""Paths of a sandbox's or a task container's own layout: the same on every machine."""

SKIPPED = re.compile(r"(^|/)(LICEN[CS]E[^/]*|NOTICE[^/]*|COPYING[^/]*)$"  # licences
                     r"|(^|/)(vendor|third_party|node_modules)/|^cluster/schemas/"  # vendored (the KubeRay schema)
                     r"|(^|/)demo-packs/|\.pack\.tar\.gz$")  # recorded replay packs
"""Tracked files that are not the project's own text."""


def machine_paths(root: Path) -> list[str]:
    """``file:line: path`` for every machine path in the text files git tracks under ``root``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=30)
    found = []
    for name in filter(None, listed.stdout.decode().split("\0")):
        path = root / name
        if SKIPPED.search(name) or not path.is_file():
            continue
        data = path.read_bytes()
        try:
            text = data.decode()
        except UnicodeDecodeError:
            continue
        if "\0" in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{name}:{number}: {match.group()}" for match in MACHINE_PATH.finditer(line)
                      if not PROTOCOL_PATHS.match(line, match.start())]
    return found


def test_no_tracked_file_names_a_folder_of_one_machine() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing says which files are the project's")
    found = machine_paths(REPO)
    assert not found, "absolute paths of one machine (find the data or tool through configuration, the environment " \
                      "or ecdysis.usercache.cache_dir(); a protocol's own path goes in PROTOCOL_PATHS):\n" + \
                      "\n".join(found)


def _write(path: Path, text: str) -> None:
    """``text`` with each ``@`` a root ``/`` (so that this file holds no machine path of its own)."""
    path.write_text(text.replace("@", "/"))


def test_the_scan_names_each_machine_path_and_passes_over_protocol_paths(tmp_path: Path) -> None:
    _write(tmp_path / "found.py", 'DATA = "@work/x"\nok = "@tmp/y"\n'
                                  'CACHE = "@root/.cache/ecdysis"  # and "@home/bob/runs"\n')
    (tmp_path / "windows.md").write_text("a store at C:" + "\\Users\\bob\\runs\n")
    _write(tmp_path / "fine.py", 'paths = ["@tmp/x", "@proc/self", "@etc/passwd", "@usr/bin", "@harness/h.py",\n'
                                 '         "@work/bundle/harness.py", "@root/matrix.txt", "@home/user1/f",\n'
                                 '         "$HOME/work/x", "~/work/x", "a/work/x", "@home/alice", "if x:\\n"]\n')
    _write(tmp_path / "binary.bin", "\0@work/x")
    _write(tmp_path / "LICENSE", "@home/author/\n")
    _write(tmp_path / "untracked.py", '"@work/untracked"\n')
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "found.py", "windows.md", "fine.py", "binary.bin", "LICENSE"], cwd=tmp_path,
                   check=True)
    expected = ["found.py:1: @work/x", "found.py:3: @root/.cache", "found.py:3: @home/bob/", "windows.md:1: C:" + "\\U"]
    assert machine_paths(tmp_path) == [line.replace("@", "/") for line in expected]
