"""The console script's exit: the command's exit code and every ``atexit`` handler survive, and the interpreter's
teardown (where Arrow's thread pools once aborted a finished ``ecdysis runs watch`` with -6) is skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ecdysis.cli.entry import exit_code

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))

# A command registered beside the real ones. ``Witness.__del__`` runs only when the interpreter tears its modules
# down; the ``atexit`` handler stands for Ray's shutdown, which must still run.
PROBE = """
import atexit, sys
import typer
from ecdysis.cli import entry, main as cli

marks = sys.argv.pop(1)

class Witness:
    def __del__(self, open=open, path=marks + ".teardown"):  # builtins may be gone by then
        open(path, "w").close()

witness = Witness()

@cli.app.command("probe-exit")
def probe_exit(code: int) -> None:
    atexit.register(lambda: open(marks + ".atexit", "w").close())
    print("probe ran", flush=False)
    raise typer.Exit(code)

if sys.argv.pop(1) == "entry":
    entry.main()
else:
    cli.app()
"""


def _probe(tmp_path: Path, how: str, code: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    marks = tmp_path / how
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = subprocess.run([sys.executable, str(script), str(marks), how, "probe-exit", str(code)],
                          capture_output=True, text=True, timeout=120)
    return done, marks


@pytest.mark.parametrize("code", [0, 3])
def test_the_entry_point_keeps_the_exit_code_and_exit_handlers_and_skips_the_teardown(tmp_path: Path,
                                                                                     code: int) -> None:
    done, marks = _probe(tmp_path, "entry", code)
    assert done.returncode == code, done.stderr
    assert done.stdout == "probe ran\n"  # buffered output is flushed before the process ends
    assert Path(f"{marks}.atexit").exists()
    assert not Path(f"{marks}.teardown").exists()


def test_without_the_entry_point_the_interpreter_tears_down(tmp_path: Path) -> None:
    """The witness of the test above does see a teardown when one happens."""
    done, marks = _probe(tmp_path, "plain", 0)
    assert done.returncode == 0, done.stderr
    assert Path(f"{marks}.atexit").exists() and Path(f"{marks}.teardown").exists()


def test_the_console_script_ends_with_the_commands_code() -> None:
    missing = subprocess.run([ECDYSIS, "runs", "watch", "no-such-run", "--store", "/nonexistent/store"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1
    assert "no-such-run" in missing.stdout + missing.stderr
    assert subprocess.run([ECDYSIS, "--help"], capture_output=True, text=True, timeout=120).returncode == 0


def test_exit_codes_follow_pythons_rule_for_system_exit() -> None:
    assert [exit_code(c) for c in (None, 0, 2, -1, True, False, "message")] == [0, 0, 2, 255, 1, 0, 1]
