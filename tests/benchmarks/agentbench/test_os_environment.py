"""Task containers for real (Docker, no mocks): the persistent shell, its time limit, isolation, the tamper check,
thread safety and cleanup."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from os_support import DATA_DIR, NO_DATA, docker_unavailable, leftover_containers, shown_output

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.benchmarks.agentbench.os_interaction.dockerio import exec_finished, run_exec
from ecdysis.benchmarks.agentbench.os_interaction.environment import CAPABILITIES, OSEpisode, OSService
from ecdysis.benchmarks.agentbench.os_interaction.tasks import Match, OSGold, OSTask, Script, load_tasks
from ecdysis.benchmarks.agentbench.os_interaction.tools import INVALID_CALL, TRUNCATED_NOTE

_why = docker_unavailable() or NO_DATA
pytestmark = [pytest.mark.docker, pytest.mark.skipif(_why is not None, reason=_why or "")]

LINES = "std-004-Q19-00000"  # "How many lines are there in /root/matrix.txt": 3, by `cat ... | wc -l`
STATE = "std-006-new-00007"  # make /data set-gid and sticky: graded by a check of the container's state


@pytest.fixture(scope="module")
def service() -> Iterator[OSService]:
    service = OSService()
    yield service
    service.close()
    assert leftover_containers(service) == []


@pytest.fixture(scope="module")
def tasks() -> dict[str, OSTask]:
    return {task.task_id: task for task in load_tasks(DATA_DIR, "std")}


@pytest.fixture
def episode(service: OSService, tasks: dict[str, OSTask], request: pytest.FixtureRequest) -> Iterator[OSEpisode]:
    with service.open(tasks[LINES], request.node.name) as episode:
        yield episode


@pytest.fixture
def state_episode(service: OSService, tasks: dict[str, OSTask],
                  request: pytest.FixtureRequest) -> Iterator[OSEpisode]:
    """An episode whose grader runs a check in the container (so its tools are checked for tampering first)."""
    with service.open(tasks[STATE], request.node.name) as episode:
        bash(episode, "chmod g+s /data && chmod +t /data")  # solved: only tampering can fail it
        yield episode


def bash(episode: OSEpisode, script: str) -> str:
    content, error = episode.call("bash_action", {"script": script})
    assert not error, content
    return shown_output(content)


def _task(task_id: str, **fields: object) -> OSTask:
    base = {"task_id": task_id, "split": "dev", "source": "test", "index": 0, "description": "d", "prompt": "p",
            "gold": OSGold(match=Match(answer="a", strip=True))}
    return OSTask.model_validate({**base, **fields})


# -- the persistent shell ---------------------------------------------------------------------------------------


def test_working_directory_and_variables_carry_over(episode: OSEpisode) -> None:
    assert bash(episode, "cd /tmp; export X=1") == ""
    assert bash(episode, "pwd; echo $X") == "/tmp\n1\n"


def test_su_carries_over_and_exit_returns(episode: OSEpisode) -> None:
    bash(episode, "useradd -m -s /bin/bash alice")
    bash(episode, "su - alice")
    assert bash(episode, "whoami; pwd") == "alice\n/home/alice\n"
    bash(episode, "exit")
    assert bash(episode, "whoami") == "root\n"


def test_start_script_runs_in_the_agents_shell(service: OSService, tasks: dict[str, OSTask]) -> None:
    with service.open(tasks["std-004-N4-00000"], "start-script") as episode:  # start ends with `su - jack`
        assert bash(episode, "whoami; pwd") == "jack\n/home/jack\n"


def test_stderr_syntax_errors_and_odd_characters(episode: OSEpisode) -> None:
    assert bash(episode, "echo out; echo err >&2") == "out\nerr\n"
    assert "unexpected EOF" in bash(episode, 'echo "unclosed')
    assert bash(episode, "printf '%s|' \"50%\" 'a\\b' é; echo") == "50%|a\\b|é|\n"
    assert bash(episode, "cat <<'EOF'\nline 1\nline 2\nEOF") == "line 1\nline 2\n"


def test_a_command_past_the_time_limit_is_stopped_and_the_shell_goes_on(episode: OSEpisode) -> None:
    episode.command_timeout_s = 2
    started = time.monotonic()
    content, error = episode.call("bash_action", {"script": "echo begun; sleep 60"})
    assert not error and time.monotonic() - started < 30  # far short of the 60 s sleep, however busy the host
    assert content.startswith("The output of the OS:\n\nbegun\n")
    assert content.endswith("[the command was stopped after 2 seconds: time limit]")
    assert bash(episode, "echo still here; pgrep -cf '^sleep 60' || true") == "still here\n0\n"
    content, _ = episode.call("bash_action", {"script": "cat"})  # reads the shell's own input
    assert "time limit" in content
    assert bash(episode, "echo again") == "again\n"


def test_an_exited_shell_is_replaced(episode: OSEpisode) -> None:
    bash(episode, "cd /tmp")
    content, error = episode.call("bash_action", {"script": "exit 3"})
    assert not error and "a new shell was started" in content
    assert bash(episode, "pwd") == "/root\n"


def test_long_output_is_cut_as_upstream(episode: OSEpisode) -> None:
    content, _ = episode.call("bash_action", {"script": "seq 1 100000"})
    assert content.endswith(TRUNCATED_NOTE)
    assert len(content) == len("The output of the OS:\n\n") + 780 + len(TRUNCATED_NOTE)


def test_agent_input_never_raises(episode: OSEpisode) -> None:
    assert episode.call("rm_rf", {}) == (INVALID_CALL, True)
    assert episode.call("bash_action", "{not json")[1]
    assert episode.call("bash_action", {"script": 42})[1]
    assert episode.call("answer_action", {})[1]
    assert not episode.finished
    assert bash(episode, "echo fine") == "fine\n"
    assert episode.call("answer_action", '{"answer": "3"}') == ("Your answer has been recorded.", False)
    assert episode.finished and episode.answer == "3"
    assert episode.call("bash_action", {"script": "echo late"})[1]
    assert episode.grade().reward == 1.0


def test_finish_grades_its_thought_as_upstream(service: OSService, tasks: dict[str, OSTask]) -> None:
    with service.open(tasks[LINES], "finish") as episode:
        episode.call("finish_action", {"thought": "3"})
        assert episode.finished and episode.grade().reward == 1.0
    with service.open(tasks[LINES], "no-answer") as episode:
        grade = episode.grade()
        assert grade.reward == 0.0 and grade.breakdown == {"answered": 0.0}


# -- isolation --------------------------------------------------------------------------------------------------


def test_container_is_locked_down(service: OSService, episode: OSEpisode) -> None:
    attrs = service.client.api.inspect_container(episode.container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and not host["Privileged"]
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(CAPABILITIES)
    assert host["PidMode"] == "" and host["IpcMode"] != "host" and not host["Binds"] and attrs["Mounts"] == []
    assert host["PidsLimit"] and host["Memory"]
    assert "no-new-privileges:true" in host["SecurityOpt"]


def test_no_network_no_docker_socket_no_host(episode: OSEpisode) -> None:
    assert bash(episode, "ls /sys/class/net") == "lo\n"
    probe = ("import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n    print('connected')\n"
             "except OSError as exc:\n    print('refused', exc.errno)")
    assert bash(episode, f"python3 -c \"{probe}\"").startswith("refused")
    assert bash(episode, "ls /var/run/docker.sock /run/docker.sock 2>&1 | grep -c 'No such file'") == "2\n"
    assert bash(episode, "cat /proc/1/cmdline | tr '\\0' ' '") == "/usr/bin/sleep infinity "
    assert bash(episode, "ls /work 2>&1") == "ls: cannot access '/work': No such file or directory\n"
    assert bash(episode, "whoami; capsh --print 2>/dev/null | head -1; grep CapEff /proc/self/status") \
        .splitlines()[-1].split()[1] != "000001ffffffffff"


def test_gold_never_enters_the_container_before_grading(service: OSService) -> None:
    task = load_tasks(DATA_DIR, "train")[0]
    gold = task.gold
    assert gold.example is not None and gold.example.code and gold.explanation
    marks = [gold.example.code.strip(), gold.explanation[:60]]
    with service.open(task, "gold") as episode:
        attrs = service.client.api.inspect_container(episode.container_id)
        config = " ".join([*attrs["Config"]["Env"], *attrs["Config"]["Cmd"], *attrs["Config"]["Labels"].values()])
        changed = [change["Path"] for change in service.client.api.diff(episode.container_id) or []
                   if change["Kind"] != 2]
        contents = bash(episode, "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; "
                                 f"find {' '.join(changed)} -maxdepth 0 -type f -exec cat {{}} + 2>/dev/null")
        for mark in marks:
            assert mark not in config and mark not in contents
        assert not any(mark in task.prompt for mark in marks)


# -- grading and tampering --------------------------------------------------------------------------------------


def test_tampered_python3_grades_zero(state_episode: OSEpisode) -> None:
    episode = state_episode
    bash(episode, "rm /usr/bin/python3; printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3; chmod +x /usr/bin/python3")
    episode.call("finish_action", {"thought": "done"})
    grade = episode.grade()
    assert grade.reward == 0.0 and grade.breakdown["untampered"] == 0.0
    assert grade.note.startswith("tampered") and "/usr/bin/python3 was modified" in grade.note


def test_ld_so_preload_grades_zero(state_episode: OSEpisode) -> None:
    episode = state_episode
    bash(episode, "echo /nonexistent.so > /etc/ld.so.preload")
    episode.call("finish_action", {"thought": "done"})
    grade = episode.grade()
    assert grade.reward == 0.0 and "/etc/ld.so.preload was created" in grade.note


def test_replaced_coreutil_and_loader_link_are_caught(state_episode: OSEpisode) -> None:
    episode = state_episode
    bash(episode, "cp /usr/bin/true /usr/bin/wc; ln -sfn /tmp /lib64")
    episode.call("finish_action", {"thought": "done"})
    note = episode.grade().note
    assert "/usr/bin/wc was modified" in note and "/lib64 was modified" in note


def test_shadowing_a_tool_on_path_does_not_fool_the_grader(service: OSService, tasks: dict[str, OSTask]) -> None:
    fake = "printf '#!/bin/sh\\necho 42\\n' > /usr/local/bin/wc && chmod +x /usr/local/bin/wc && hash -r"
    with service.open(tasks[LINES], "shadow-wrong") as episode:
        assert bash(episode, f"{fake}; cat /root/matrix.txt | wc -l") == "42\n"
        episode.call("answer_action", {"answer": "42"})
        grade = episode.grade()
        assert (grade.reward, grade.breakdown) == (0.0, {"answered": 1.0, "correct": 0.0})
    with service.open(tasks[LINES], "shadow-right") as episode:
        bash(episode, fake)
        episode.call("answer_action", {"answer": "3"})
        assert episode.grade().reward == 1.0


# -- setup, threads and cleanup ---------------------------------------------------------------------------------


def test_failing_init_is_an_environment_error_and_leaves_nothing(service: OSService) -> None:
    broken = _task("broken-init", init=[Script(code="echo partial; exit 3")])
    before = len(leftover_containers(service))
    with pytest.raises(EnvironmentSetupError, match="init script 1 exited with status 3"):
        service.open(broken, "broken")
    assert len(leftover_containers(service)) == before


def test_unsupported_task_is_refused(service: OSService, tasks: dict[str, OSTask]) -> None:
    with pytest.raises(ValueError, match="script file"):
        service.open(tasks["std-001-stock-00000"], "unsupported")


def test_episodes_run_in_threads(service: OSService, tasks: dict[str, OSTask]) -> None:
    def run(number: int) -> tuple[str, str, float]:
        with service.open(tasks[LINES], f"thread-{number}") as episode:
            marker = bash(episode, f"echo {number} > /root/mine; cat /root/mine; wc -l < /root/matrix.txt")
            episode.call("answer_action", {"answer": "3"})
            return episode.container_id, marker, episode.grade().reward

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(4)))
    assert len({container for container, _, _ in results}) == 4
    assert [marker for _, marker, _ in results] == [f"{number}\n3\n" for number in range(4)]
    assert all(reward == 1.0 for _, _, reward in results)


def test_close_is_idempotent_and_removes_the_container(service: OSService, tasks: dict[str, OSTask]) -> None:
    episode = service.open(tasks[LINES], "closing")
    container = episode.container_id
    episode.close()
    episode.close()
    assert episode.call("bash_action", {"script": "true"}) == ("The OS environment has been closed.", True)
    with pytest.raises(EnvironmentSetupError):
        episode.grade()
    assert container not in {summary["Id"] for summary in leftover_containers(service)}
    left_open = service.open(tasks[LINES], "left-open")
    service.close()
    assert leftover_containers(service) == []
    assert left_open.call("bash_action", {"script": "true"})[1]


def test_an_exec_not_yet_started_has_not_finished(service: OSService, episode: OSEpisode) -> None:
    """The engine answers ``exec_start`` before the process runs; until then ``exec_inspect`` reads as not running,
    which is not an exit."""
    api = service.client.api
    exec_id = api.exec_create(episode.container_id, ["sh", "-c", "echo listed"])["Id"]
    unstarted = api.exec_inspect(exec_id)
    assert not unstarted["Running"] and not exec_finished(unstarted)
    assert api.exec_start(exec_id) == b"listed\n"
    assert exec_finished(api.exec_inspect(exec_id))


def test_output_that_arrives_after_the_exit_is_kept(service: OSService, episode: OSEpisode) -> None:
    """The engine records an exec's exit before it has copied all of its output. A one-off exec that stopped reading
    0.3 s after the exit lost a process listing on a busy CI machine ("could not list the container's processes").
    Here a background child writes 1 s after its parent exited: it still counts, and a child that holds the stream
    open for longer does not hold the exec past the engine's ~2 s close."""
    started = time.monotonic()
    late = run_exec(service.client, episode.container_id, ["sh", "-c", "(sleep 1; echo late) & echo early"], timeout=20)
    assert (late.exit_code, late.stdout) == (0, b"early\nlate\n")
    held = run_exec(service.client, episode.container_id, ["sh", "-c", "sleep 30 & echo early"], timeout=20)
    assert (held.exit_code, held.stdout) == (0, b"early\n")
    assert time.monotonic() - started < 20  # short of the 30 s the child holds the stream, busy host or not


def test_an_episode_whose_headers_are_read_late_runs(service: OSService, tasks: dict[str, OSTask],
                                                     late_http_headers: None) -> None:
    """On a busy CI machine a process listing's whole output came in with the exec's response headers, where the
    bare socket never saw it ("could not list the container's processes")."""
    with service.open(tasks[LINES], "late-headers") as episode:
        assert bash(episode, "echo hi") == "hi\n"
        listed = run_exec(service.client, episode.container_id, ["echo", "listed"], timeout=20)
        assert (listed.exit_code, listed.stdout) == (0, b"listed\n")
