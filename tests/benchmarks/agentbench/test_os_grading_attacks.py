"""A hostile agent against the OS grader, in real task containers: each attack answers wrongly and must grade 0
(tampering, where the attack changed the grader's tools); the same task solved honestly still grades 1; a container
that vanishes while grading is an infrastructure fault; the disk quota holds where the daemon enforces one."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import docker.errors
import pytest
from os_support import DATA_DIR, NO_DATA, docker_unavailable, shown_output

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.benchmarks.agentbench.os_interaction import snapshot
from ecdysis.benchmarks.agentbench.os_interaction.checks import HARDENED
from ecdysis.benchmarks.agentbench.os_interaction.environment import GRADER_PATH, OSEpisode, OSService
from ecdysis.benchmarks.agentbench.os_interaction.grading import evaluate
from ecdysis.benchmarks.agentbench.os_interaction.tasks import OSTask, load_tasks
from ecdysis.sandbox.ownership import OWNER_LABEL

_why = docker_unavailable() or NO_DATA
pytestmark = [pytest.mark.docker, pytest.mark.skipif(_why is not None, reason=_why or "")]

LINES = "std-004-Q19-00000"  # "How many lines are there in /root/matrix.txt": 3, by its example `cat ... | wc -l`
STATE = "std-006-new-00007"  # make /data set-gid and sticky: a bash check of `ls -l /` in the container
WRITES = "std-007-bootstrap-00052"  # its example makes 12 folders under ~/StudentFiles, then counts 13
PYTHON = "std-004-Q47-00000"  # move a file and answer its old path: a python check of the answer, two of the state
READ_BY = "std-006-new-00002"  # /testfile readable to jack, bill and tom, not george: upstream read it in login shells
MODES = "std-006-new-00004"  # files 660, folders 750 under ~/videos: upstream's check finds none that differ
SUID = "std-006-new-00003"  # remove find's set-uid bit

# Issue 50: each passed upstream's own check with the task undone (the /adata one was not run then).
CHECK_ATTACKS = {
    READ_BY: ("printf 'case $(id -un) in george) exit 1;; *) echo test; exit 0;; esac\\n' > /etc/profile.d/zz.sh; "
              "printf 'echo test; exit 0\\n' > /home/jack/.profile; "
              "printf '#!/bin/sh\\necho test\\n' > /tmp/sh; chmod 755 /tmp/sh; usermod -s /tmp/sh bill"),
    MODES: "rm -rf ~/videos; mkdir ~/videos; chmod 750 ~/videos",
    STATE: "mkdir /adata && chmod g+s,+t /adata",
    SUID: "chmod u-x /usr/bin/find",  # -rwSr-xr-x: still set-uid root for everyone else
    PYTHON: "rm /home/user1/os/linux/commands/MyPersonalComputer.config; touch /home/user2/MyPersonalComputer.config",
}
HONEST_AFTER = {  # the task's own example, where the attack left what the setup made (00004's init made it again)
    READ_BY: "groupadd tmp && usermod -a -G tmp jack && usermod -a -G tmp bill && usermod -a -G tmp tom && "
             "chmod 640 /testfile && chgrp tmp /testfile",
    MODES: "cd ~/videos && mkdir old new && touch vid1 vid2 new/a new/b old/c && cd && "
           "find ~/videos -type f -exec chmod 660 {} + && find ~/videos -type d -exec chmod 750 {} +",
}

CHURN = r"""
import os, sys, time
target, fake = sys.argv[1], sys.argv[2].encode()
def grader_running():
    for pid in os.listdir("/proc"):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"PATH=" + GRADER_PATH in environ:
            return True
    return False
while True:  # a new pid every few milliseconds: never where a listing saw it
    if os.fork():
        os._exit(0)
    if grader_running():
        with open(target + ".new", "wb") as handle:
            handle.write(fake)
        os.chmod(target + ".new", 0o755)
        os.replace(target + ".new", target)
    time.sleep(0.005)
""".replace("GRADER_PATH", repr(GRADER_PATH.encode()))
"""Forks a successor and exits, over and over; whenever it sees one of the grader's scripts running in its
container (by their PATH), it replaces ``argv[1]`` with ``argv[2]`` for the grader's next exec."""


@pytest.fixture(scope="module")
def service() -> Iterator[OSService]:
    service = OSService()
    yield service
    service.close()


@pytest.fixture(scope="module")
def tasks() -> dict[str, OSTask]:
    return {task.task_id: task for task in load_tasks(DATA_DIR, "std")}


def bash(episode: OSEpisode, script: str) -> str:
    content, error = episode.call("bash_action", {"script": script})
    assert not error, content
    return shown_output(content)


def start_churn(episode: OSEpisode, target: str, fake: str) -> None:
    bash(episode, f"cat > /tmp/churn.py <<'EOF'\n{CHURN}\nEOF\n"
                  f"(python3 /tmp/churn.py {target} '{fake}' >/dev/null 2>&1 &)")
    pids = bash(episode, "sleep 0.2; ps -eo comm | grep -c '^python3$'")
    assert int(pids) >= 1, "the churner is not running"


def test_fork_churn_replacing_bash_cannot_pass_a_state_check(service: OSService, tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[STATE], "churn-bash") as episode:
        start_churn(episode, "/usr/bin/bash", "#!/bin/sh\nexit 0\n")
        episode.call("finish_action", {"thought": "done"})  # /data untouched: the check must fail
        grade = episode.grade()
        assert (grade.reward, grade.breakdown) == (0.0, {"answered": 1.0, "untampered": 1.0, "correct": 0.0}), \
            grade.note
        # killed with its container: nothing of the agent's runs after grading, and bash is the image's
        after = service.client.api.exec_create(episode.container_id,
                                               ["/usr/bin/bash", "-c", "echo intact; ps -eo comm"])
        listing = service.client.api.exec_start(after["Id"]).decode()
        assert listing.startswith("intact\n") and "python3" not in listing


def test_fork_churn_replacing_wc_cannot_change_the_expected_answer(service: OSService,
                                                                   tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[LINES], "churn-wc") as episode:
        start_churn(episode, "/usr/bin/wc", "#!/bin/sh\necho 0\n")
        episode.call("answer_action", {"answer": "0"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown) == (0.0, {"answered": 1.0, "correct": 0.0}), grade.note


def test_fake_kill_and_sh_on_path_are_tampering(service: OSService, tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[STATE], "fake-kill") as episode:
        bash(episode, "for tool in kill sh; do printf '#!/usr/bin/dash\\nexit 0\\n' > /usr/local/sbin/$tool; "
                      "chmod +x /usr/local/sbin/$tool; done; hash -r")
        episode.call("finish_action", {"thought": "done"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown["untampered"]) == (0.0, 0.0)
        assert "/usr/local/sbin/kill was added" in grade.note and "/usr/local/sbin/sh was added" in grade.note


def test_an_added_python_zip_is_tampering(service: OSService, tasks: dict[str, OSTask]) -> None:
    plant = ("python3 -c \"import zipfile; z = zipfile.ZipFile('/usr/lib/python311.zip', 'w'); "
             "z.writestr('encodings/__init__.py', 'import os; os._exit(0)'); z.close()\"; "
             "python3 -I -c 'raise SystemExit(3)'; echo $?")
    with service.open(tasks[PYTHON], "python-zip") as episode:
        bash(episode, "mv /home/user1/os/linux/commands/MyPersonalComputer.config /home/user2/")
        assert bash(episode, plant) == "0\n"  # every isolated python now exits 0
        episode.call("answer_action", {"answer": "/not/the/old/path"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown["untampered"]) == (0.0, 0.0)
        assert "/usr/lib/python311.zip was added" in grade.note


def test_deleting_the_examples_data_does_not_change_the_expected_answer(service: OSService,
                                                                        tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[LINES], "delete-data") as episode:
        assert bash(episode, ": > /root/matrix.txt; cat /root/matrix.txt | wc -l") == "0\n"
        episode.call("answer_action", {"answer": "0"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown) == (0.0, {"answered": 1.0, "correct": 0.0}), grade.note


def test_honest_answers_still_grade_one(service: OSService, tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[STATE], "honest-state") as episode:
        bash(episode, "chmod g+s /data && chmod +t /data; chmod u-s /usr/bin/find; chmod u+s /usr/bin/find; "
                      "sleep 1000 & disown")  # a mode change and a leftover process are no tampering
        episode.call("finish_action", {"thought": "done"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown) == (1.0, {"answered": 1.0, "untampered": 1.0, "correct": 1.0}), \
            grade.note
    with service.open(tasks[LINES], "honest-lines") as episode:
        bash(episode, "rm /root/matrix.txt")  # the data may go once the agent has read it
        episode.call("answer_action", {"answer": "3"})
        assert episode.grade().reward == 1.0


@pytest.mark.parametrize("task_id", sorted(CHECK_ATTACKS))
def test_a_state_check_reads_only_what_its_task_is_about(service: OSService, tasks: dict[str, OSTask],
                                                         task_id: str) -> None:
    """Each attack passes upstream's text of the task's check (the control, in the same container) and fails ours;
    where the task's own solution can follow in the same container (the two tasks of the issue), it then grades 1
    through the whole grading path, the attack's start-up files still in place; elsewhere the attack grades 0."""
    upstream = {ours: theirs for theirs, ours in HARDENED.items()}
    gold = tasks[task_id].gold
    answer = "/home/user1/os/linux/commands/MyPersonalComputer.config" if task_id == PYTHON else "done"
    with service.open(tasks[task_id], "check-attack") as episode:
        bash(episode, CHECK_ATTACKS[task_id])
        for check in gold.check or []:
            if check is not None and check.code in upstream:
                assert bash(episode, f"cat > /tmp/check <<'EOF'\n{upstream[check.code]}\nEOF\n"
                                     "bash /tmp/check >/dev/null 2>&1; echo $?; rm /tmp/check") == "0\n"
        assert evaluate(gold, answer, episode._grader_run)[0] is False
        if task_id in HONEST_AFTER:
            bash(episode, HONEST_AFTER[task_id])
        episode.call("answer_action", {"answer": answer})
        grade = episode.grade()
        correct = 1.0 if task_id in HONEST_AFTER else 0.0
        assert (grade.reward, grade.breakdown) == (correct, {"answered": 1.0, "untampered": 1.0, "correct": correct}), \
            grade.note


def test_a_container_gone_while_grading_is_an_infrastructure_fault(service: OSService,
                                                                   tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[STATE], "vanished") as episode:
        episode.call("finish_action", {"thought": "done"})
        service.client.api.remove_container(episode.container_id, force=True)
        with pytest.raises(EnvironmentSetupError, match="grading episode vanished failed"):
            episode.grade()


def test_a_container_the_agent_broke_grades_zero_not_as_an_infrastructure_fault(service: OSService,
                                                                                tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[STATE], "broken") as episode:
        bash(episode, "chmod g+s /data && chmod +t /data; cd /; rm -rf /root; echo > /root")
        episode.call("finish_action", {"thought": "done"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown["untampered"]) == (0.0, 1.0)
        assert "could no longer be started" in grade.note


def test_writing_past_the_disk_quota_fails(service: OSService, tasks: dict[str, OSTask],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The quota holds: EDQUOT on btrfs (with full qgroup accounting the image's ~250 MB counts too, with simple
    quotas only what the container writes), ENOSPC on overlay2 over xfs."""
    if service.disk_size is None:
        pytest.skip("needs a Docker daemon that enforces a container's disk size (btrfs with quota): make "
                    "sandbox-ready")
    monkeypatch.setattr(service, "disk_size", "300m")
    with service.open(tasks[LINES], "quota") as episode:
        attrs = service.client.api.inspect_container(episode.container_id)
        assert attrs["HostConfig"]["StorageOpt"] == {"size": "300m"}
        output = bash(episode, "dd if=/dev/zero of=/root/big bs=1M count=400 2>&1 | head -1; "
                               "du -sm /root/big | cut -f1")
        first, size = output.splitlines()
        assert ("Disk quota exceeded" in first or "No space left on device" in first) and int(size) <= 300, output


def test_grading_ignores_many_files_the_agent_wrote(service: OSService, tasks: dict[str, OSTask]) -> None:
    """Files outside the protected trees cost the grader nothing it reads one by one."""
    with service.open(tasks[STATE], "many-files") as episode:
        bash(episode, "chmod g+s /data && chmod +t /data; mkdir /root/many && cd /root/many && "
                      "seq 1 20000 | xargs touch")
        episode.call("finish_action", {"thought": "done"})
        started = time.monotonic()
        assert episode.grade().reward == 1.0
        assert time.monotonic() - started < 30  # a generous bound: a hang shows, load does not


def test_an_example_that_writes_runs_in_a_snapshot_that_goes_with_the_episode(service: OSService,
                                                                               tasks: dict[str, OSTask]) -> None:
    episode = service.open(tasks[WRITES], "snapshot")
    image = episode._snapshot
    assert image is not None and bash(episode, "find ~/StudentFiles -type d | wc -l") == "1\n"  # nothing made yet
    bash(episode, "rm -rf ~/StudentFiles")
    episode.call("answer_action", {"answer": "13"})
    assert episode.grade().reward == 1.0
    episode.close()
    with pytest.raises(docker.errors.ImageNotFound):
        service.client.images.get(image)


def test_leftover_snapshots_go_and_the_task_image_stays(service: OSService, tasks: dict[str, OSTask]) -> None:
    dead = subprocess.Popen(["true"])  # a pid that has exited: the owner of an abandoned snapshot
    dead.wait()
    with service.open(tasks[LINES], "leftover") as episode:
        labels = {**service._labels("leftover"), OWNER_LABEL: f"{socket.gethostname()}:{dead.pid}"}
        image = snapshot.take(service.client, episode.container_id, labels)
    assert snapshot.remove_leftover_images(service.client) >= 1
    with pytest.raises(docker.errors.ImageNotFound):
        service.client.images.get(image)
    service.client.images.get(service.image)
