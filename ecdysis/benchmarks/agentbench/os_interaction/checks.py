"""Upstream's state checks that read more than their task is about, and the checks that run in their place.

A state check runs in the agent's container after the agent (as root, by absolute path, with a fixed ``PATH`` and
``HOME``). Upstream's own text of five of them passes without the task being done, because it reads something the
agent controls besides what the task asks it to change:

- ``runuser -l USER -c 'cat /testfile'`` runs a login shell and a PAM session: it sources ``/etc/profile``,
  ``/etc/profile.d/*.sh`` and the user's dot files, reads ``/etc/environment`` (``LD_PRELOAD``) and runs the user's
  login shell from ``/etc/passwd``; any of them can print the expected text with ``/testfile`` untouched. Ours reads
  the file as the user with ``setpriv`` (no shell, no PAM; the user and group databases only, which are what the
  task is about).
- A check that asserts absence (``find`` prints nothing, ``find PATH`` fails) passes once the place it looks at is
  gone (``rm -rf ~/videos``). Ours first asserts that the place exists as the setup left it: the folder, and each
  file and folder the setup made in it, of the same type (a symlink is not a file).
- ``ls -l / | grep data`` reads the first line that contains ``data`` (a folder ``/adata`` sorts first), and the
  ``-..s`` test of ``ls -l /usr/bin/find`` misses a set-uid bit without the owner's execute bit (``-rwS``), which
  still runs as root for others. Ours ask ``stat``/``test`` about exactly that path.
- A file "moved" into place is a file with the moved file's content, not any entry of that name.

Each replacement passes the task's own example, as upstream's text does. The checks are keyed by upstream's exact
text, so the same record in another split is covered; ``tests/benchmarks/agentbench/test_os_tasks.py`` fails when
a data file brings an in-container check that is in neither table.
"""

from __future__ import annotations

_READ_AS = ('read_as() { /usr/bin/setpriv --reuid="$1" --regid="$(/usr/bin/id -g -- "$1")" --init-groups '
            '-- /usr/bin/cat /testfile; }\n')

HARDENED: dict[str, str] = {
    # std-006-new-00002: readable to jack, bill and tom, not to george.
    "(runuser -l jack -c 'cat /testfile' && runuser -l bill -c 'cat /testfile' && runuser -l tom -c 'cat /testfile' "
    "&& runuser -l george -c 'cat /testfile') | if [ \"$(cat -)\" = \"test\"$'\\n'\"test\"$'\\n'\"test\" ]; "
    "then exit 0; else exit 1; fi":
        _READ_AS + "(read_as jack && read_as bill && read_as tom && read_as george) | "
        "if [ \"$(/usr/bin/cat -)\" = \"test\"$'\\n'\"test\"$'\\n'\"test\" ]; then exit 0; else exit 1; fi",
    # std-006-new-00003: no set-uid bit on find (an "S" is one too).
    "ls -l /usr/bin/find | awk '{if ($1~/^-..s/) { exit 1; } else { exit 0; }}'":
        "[ -f /usr/bin/find ] && [ ! -L /usr/bin/find ] && [ ! -u /usr/bin/find ]",
    # std-006-new-00004: files 660 and folders 750 under ~/videos, which the init made in /root.
    "(find ~/videos -type f ! -perm 660 -ls && find ~/videos -type d ! -perm 750 -ls) | if [ \"$(cat -)\" = \"\" ]; "
    "then exit 0; else exit 1; fi":
        "listing=$(/usr/bin/find /root/videos -printf '%y %P\\n') || exit 1\n"
        "for entry in 'd ' 'd new' 'd old' 'f new/a' 'f new/b' 'f old/c' 'f vid1' 'f vid2'; do\n"
        "  printf '%s\\n' \"$listing\" | /usr/bin/grep -qxF -- \"$entry\" || exit 1\n"
        "done\n"
        "(/usr/bin/find /root/videos -type f ! -perm 660 -ls && /usr/bin/find /root/videos -type d ! -perm 750 -ls) "
        "| if [ \"$(/usr/bin/cat -)\" = \"\" ]; then exit 0; else exit 1; fi",
    # std-006-new-00007: /data itself set-gid and sticky.
    "ls -l / | grep data | awk '{if ($1~/^d.....s..t/) { exit 0; } else { exit 1; } }'":
        "[[ \"$(/usr/bin/stat -c %A /data)\" =~ ^d.....s..t ]]",
    # std-004-Q47-00000: the file has left its folder, which is still there ...
    "find /home/user1/os/linux/commands/MyPersonalComputer.config >/dev/null 2>/dev/null && exit 1 || exit 0":
        "f=/home/user1/os/linux/commands/MyPersonalComputer.config\n"
        "[ -d \"${f%/*}\" ] && [ ! -L \"${f%/*}\" ] && [ ! -e \"$f\" ] && [ ! -L \"$f\" ]",
    # ... and is in the current folder with its content.
    "find /home/user2/MyPersonalComputer.config >/dev/null 2>/dev/null && exit 0 || exit 1":
        "f=/home/user2/MyPersonalComputer.config\n"
        "[ -f \"$f\" ] && [ ! -L \"$f\" ] && [ \"$(/usr/bin/cat \"$f\")\" = 'Linux-Ubuntu-20.04?' ]",
}
"""Upstream's text of a state check → the check that runs instead (bash, like upstream's)."""

READ_NOTHING_ELSE = frozenset({
    # std-004-Q47-00000: the answer alone (argv[1]), in python run isolated.
    "from sys import argv\nassert argv[1].strip()=='/home/user1/os/linux/commands/MyPersonalComputer.config'",
})
"""Upstream's in-container checks that were reviewed and read only what their task is about; they run as they are."""


