"""Where a task's example runs before the agent acts: in the agent's own container right after setup, or in a
snapshot of it.

The expected answer is computed before the agent's first command, so nothing the agent does changes it. Running the
example in the agent's container is cheap and sees what the setup started (``ps -A | wc -l`` counts the five
``sleep`` of the init), but it must not change anything the agent will see: only an example that plainly only reads
runs there (``read_only``). Any other (``mkdir -p ~/StudentFiles/...; find ~/StudentFiles -type d | wc -l``), and
any python example, runs at grading in a fresh container of a snapshot taken after setup (see ``snapshot``). A
mistaken "only reads" can only cost the task (the agent would find what the example made); it cannot help an agent,
which has not acted yet.
"""

from __future__ import annotations

import re

from ecdysis.benchmarks.agentbench.os_interaction.tasks import Script

_WRITES = re.compile(
    r"(?<![\w./-])(rm|rmdir|mv|cp|mkdir|touch|chmod|chown|chgrp|chattr|setfacl|ln|tee|dd|truncate|install|shred|"
    r"unlink|rename|mktemp|mkfifo|mknod|split|csplit|patch|tar|zip|unzip|gzip|gunzip|bzip2|xz|git|wget|curl|apt|"
    r"apt-get|dpkg|pip|pip3|python|python3|perl|ruby|node|vi|vim|ex|ed|crontab|useradd|userdel|usermod|groupadd|"
    r"groupdel|passwd|chpasswd|adduser|deluser|kill|pkill|killall|su|sudo|runuser|nohup|mount|ssh-keygen|openssl|"
    r"sqlite3|source|eval|exec|sort|sed|awk|xargs|find|bash|sh|env)(?![\w.-])")
"""Commands that may write or run something that may; ``find``, ``xargs``, ``awk``, ``sed`` and ``sort`` mostly
only read, and are judged by how they are used (``_READING_USES``)."""
_READERS = {"cat", "wc", "stat", "du", "grep", "egrep", "fgrep", "head", "tail", "ls", "file", "md5sum", "sha256sum",
            "basename", "dirname", "echo", "printf", "readlink", "realpath", "cut", "sort", "uniq", "tr"}
_RUNS = re.compile(r"(?:-exec|-execdir|xargs(?:\s+-\S+)*)\s+(\S+)")
_READING_USES = {
    "find": lambda code: not re.search(r"-(delete|ok|okdir|fprint|fprint0|fprintf|fls)\b", code),
    "xargs": lambda code: True,  # what it runs is checked with find's -exec, below
    "sed": lambda code: not re.search(r"(?<![\w-])-[a-zA-Z]*i|--in-place", code),
    "sort": lambda code: not re.search(r"(?<![\w-])-[a-zA-Z]*o\b|--output", code),
    "awk": lambda code: not re.search(r"print[f]?[^|;}\n]*>|system\s*\(|\|\s*\"|getline", code),
}
_HARMLESS = re.compile(r"[0-9]?>\s*/dev/null|[0-9]?>&[0-9]")
_SINGLE_QUOTED = re.compile(r"'[^']*'")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")


def read_only(example: Script) -> bool:
    """Whether ``example`` is a bash script that plainly only reads (so it may run in the agent's container before
    the agent acts): no command that may write, no redirection into a file, no use of ``$1`` (the answer, which
    upstream passes to the example too)."""
    if example.language != "bash" or not example.code:
        return False
    code = "\n".join(line for line in example.code.splitlines() if not line.lstrip().startswith("#"))
    unquoted = _HARMLESS.sub(" ", _SINGLE_QUOTED.sub("''", code))
    if re.search(r"\$\{?[1-9@*#]", unquoted) or ">" in unquoted:
        return False
    bare = _QUOTED.sub("''", unquoted)
    for found in _WRITES.finditer(bare):
        judge = _READING_USES.get(found.group(1))
        if judge is None or not judge(code if found.group(1) == "awk" else bare):
            return False
    return all(command.strip("'\"") in _READERS for command in _RUNS.findall(bare))
