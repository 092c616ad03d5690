"""A harness that looks for the host's secrets and tries the kernel's keyrings (also a program: the coding-agent
sandbox runs it as ``python3 harness.py CONFIG_JSON``), or (``{"churn": N}``) leaves N detached processes that keep
starting children that fill some memory, so that many processes are dying, slowly, when the sandbox closes."""

import ctypes
import json
import os
import platform
import sys

SESSION, USER = -3, -4  # KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING
KEYCTL_GET_KEYRING_ID, KEYCTL_SEARCH = 0, 10
CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl


def _keyring_calls(config):
    add_key, keyctl = CALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(*args):
        result = libc.syscall(*args)
        return result if result >= 0 else f"errno {ctypes.get_errno()}"

    out = {"session_id": call(keyctl, KEYCTL_GET_KEYRING_ID, SESSION, 0)}
    payload = config["key_payload"].encode()
    keyrings = [(name, number) for name, number in (("@s", SESSION), ("@u", USER))
                if name in config.get("write_to", ["@s", "@u"])]
    for name in config.get("write", []):
        for keyring, number in keyrings:
            out[f"add {name} {keyring}"] = call(add_key, b"user", name.encode(), payload, len(payload), number)
    found = {}
    for name in config.get("look_for", []):
        for keyring, number in keyrings:
            found[f"{name} {keyring}"] = call(keyctl, KEYCTL_SEARCH, number, b"user", name.encode(), 0)
    out["search"] = found
    try:
        with open("/proc/keys") as handle:
            keys = handle.read()
    except OSError as exc:
        keys = type(exc).__name__
    out["proc_keys_names"] = [name for name in config.get("look_for", []) if name in keys]
    return out


def probe(config):
    canary = bytes.fromhex(config["canary_hex"])  # not itself in a command line the scan reads
    found = [name for name, value in os.environ.items()
             if canary in value.encode() or name.endswith(("_API_KEY", "_SECRET_ACCESS_KEY"))]
    readable = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            readable.append(f"{pid}/{part}")
            if canary in data:
                found.append(f"/proc/{pid}/{part}")
    with open("/proc/1/cmdline", "rb") as handle:
        init = handle.read().split(b"\0")[0].decode(errors="replace")
    return {"found": found, "readable": readable, "env": sorted(os.environ), "init": init, "pid": os.getpid(),
            "keyrings": _keyring_calls(config)}


def churn(count, megabytes):
    import time

    for _ in range(count):
        if os.fork() == 0:
            os.setsid()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                child = os.fork()
                if child == 0:
                    block = bytearray(megabytes << 20)
                    block[::4096] = b"x" * len(block[::4096])
                    os._exit(0)
                os.waitpid(child, 0)
            os._exit(0)
    time.sleep(0.1)  # let them churn before the episode ends
    return {"churning": count}


def run(session):
    config = session.config
    report = churn(config["churn"], config.get("megabytes", 16)) if "churn" in config else probe(config)
    session.log(json.dumps(report))
    return "agent_stop"


def selftest():
    assert callable(probe)


if __name__ == "__main__":
    print("PROBE" + json.dumps(probe(json.loads(sys.argv[1]))), flush=True)
