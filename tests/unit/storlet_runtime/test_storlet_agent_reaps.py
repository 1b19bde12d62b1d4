"""The sandbox's first program reaps the sandbox's orphans (a fork bomb's children)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

# A storlet request process that leaves a child behind and ends, then the agent idles.
PROGRAM = """
import os, sys, time
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        time.sleep(0.5)
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(4)
"""


def stat_of(pid: str) -> tuple[str, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def children_of(parent: int) -> dict[str, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = stat_of(entry.name)
            if stat and stat[1] == parent:
                found[entry.name] = stat[0]
    return found


def test_an_orphan_becomes_the_agents_child_and_is_reaped(tmp_path):
    had_dev_log = os.path.lexists("/dev/log")
    agent = subprocess.Popen([sys.executable, "-m", "iostack.storlet_runtime.agent",  # noqa: S603
                              str(tmp_path / "log"), "--", sys.executable, "-c", PROGRAM],
                             stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        # The program itself and its orphaned grandchild, adopted by the agent.
        assert len(children_of(agent.pid)) == 2
        time.sleep(1.2)  # the orphan exited at 0.5 s; the agent reaps within 0.2 s
        assert list(children_of(agent.pid).values()) == ["S"]  # no zombie left
    finally:
        agent.kill()
        agent.wait()
    # Regression: run on a host, the agent linked the host's /dev/log to its socket,
    # and every Swift server started later logged into a dead socket.
    assert os.path.lexists("/dev/log") == had_dev_log
