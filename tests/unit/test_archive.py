"""Packed bundles come back exactly, and an archive that tries to leave the bundle or carry a link is refused."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ecdysis.harness.archive import pack, unpack


def _tar(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 1, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


def test_a_bundle_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "rules").mkdir(parents=True)
    (source / "harness.py").write_text("print('hi')\n")
    (source / "rules" / "a.md").write_text("rule\n")
    target = unpack(pack(source), tmp_path / "out")
    assert (target / "harness.py").read_text() == "print('hi')\n"
    assert (target / "rules" / "a.md").read_text() == "rule\n"
    assert pack(target) == pack(source)


@pytest.mark.parametrize("member", [
    _member("../escaped.py"),
    _member("/etc/evil.py"),
    _member("rules/../../escaped.py"),
    _member("link.py", tarfile.SYMTYPE, link="/etc/passwd"),
    _member("hard.py", tarfile.LNKTYPE, link="harness.py"),
    _member("fifo", tarfile.FIFOTYPE),
], ids=["parent", "absolute", "nested-parent", "symlink", "hardlink", "fifo"])
def test_an_archive_leaving_the_bundle_or_carrying_links_is_refused(member: tarfile.TarInfo, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"outside the bundle|not a regular file"):
        unpack(_tar(_member("harness.py"), member), tmp_path / "out" / "bundle")
    assert not (tmp_path / "out" / "escaped.py").exists() and not (tmp_path / "escaped.py").exists()
