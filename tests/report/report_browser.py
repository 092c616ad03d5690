"""Headless Chromium for report tests: the DOM after scripts ran, console errors, screenshots; and a tiny DOM."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000",
         # no name resolves: anything the page tried to fetch would fail and show up as a console error
         "--host-resolver-rules=MAP * ~NOTFOUND"]
TIMEOUT_S = 180

# Runs before any other script of the page: every uncaught error and console.error lands in an attribute of <html>,
# so the dumped DOM carries them.
ERROR_COLLECTOR = """<script>(function () {
  var seen = [];
  function note(text) {
    seen.push(String(text));
    document.documentElement.setAttribute("data-js-errors", seen.join(" || "));
  }
  window.addEventListener("error", function (e) {
    var el = e.target;
    if (el && el !== window && (el.src || el.href)) { note("failed to load " + (el.src || el.href)); }
    else { note("error: " + (e.message || e.type)); }
  }, true);
  window.addEventListener("unhandledrejection", function (e) { note("rejection: " + e.reason); });
  var original = console.error;
  console.error = function () {
    note("console.error: " + Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();</script>"""


@dataclass
class Page:
    """What Chromium made of a page: the DOM after scripts ran and the browser's log."""

    dom: Node
    log: str

    def js_errors(self) -> list[str]:
        """Errors seen by the in-page collector and by Chromium's console log."""
        found = [e for e in (self.dom.attrs.get("data-js-errors") or "").split(" || ") if e]
        found += [line for line in self.log.splitlines() if ":CONSOLE" in line and "Uncaught" in line]
        return found


def instrumented_copy(report: Path, workdir: Path) -> Path:
    """A copy of ``report`` with the error collector as the first script of <head>."""
    text = report.read_text(encoding="utf-8")
    head = text.index("<head>") + len("<head>")
    copy = workdir / f"instrumented-{report.name}"
    copy.write_text(text[:head] + ERROR_COLLECTOR + text[head:], encoding="utf-8")
    return copy


def _chromium(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False)


def render(url: str) -> Page:
    """Load ``url`` in headless Chromium and parse the DOM it dumps after the page's scripts ran."""
    done = _chromium(["--dump-dom", url])
    if done.returncode != 0 or "<html" not in done.stdout:
        raise AssertionError(f"chromium --dump-dom failed ({done.returncode}): {done.stderr[-2000:]}")
    return Page(parse(done.stdout), done.stderr)


def screenshot(url: str, path: Path, *, size: str = "1400,3000") -> None:
    """Save a PNG of ``url`` at ``size`` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _chromium([f"--screenshot={path}", f"--window-size={size}", "--hide-scrollbars", url])
    if done.returncode != 0 or not path.exists():
        raise AssertionError(f"chromium --screenshot failed ({done.returncode}): {done.stderr[-2000:]}")


@dataclass
class Node:
    """An element of the dumped DOM."""

    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        """Concatenated text of this element and its descendants."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> list[Node]:
        """This element and all its descendants, in document order."""
        out = [self]
        for child in self.children:
            if isinstance(child, Node):
                out += child.iter()
        return out

    def find_all(self, tag: str | None = None, *, cls: str | None = None, **attrs: str) -> list[Node]:
        """Descendant elements with ``tag``, class ``cls`` and attribute values ``attrs``."""
        return [n for n in self.iter()[1:] if (tag is None or n.tag == tag)
                and (cls is None or cls in (n.attrs.get("class") or "").split())
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, element_id: str) -> Node:
        """The element with ``id``; AssertionError if absent."""
        found = [n for n in self.iter() if n.attrs.get("id") == element_id]
        assert found, f"no element with id {element_id!r} in the rendered page"
        return found[0]


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(markup: str) -> Node:
    """The ``<html>`` element of ``markup``."""
    builder = _Builder()
    builder.feed(markup)
    builder.close()
    html = [n for n in builder.root.iter() if n.tag == "html"]
    assert html, "no <html> element in the dumped DOM"
    return html[0]
