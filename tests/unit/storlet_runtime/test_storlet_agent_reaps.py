"""The sandbox's first program reaps the sandbox's orphans (a fork bomb's children)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from iostack.ports import wait_until

# A storlet request process that leaves a child behind and ends, then the agent idles.
# The times leave room for a loaded machine: the test waits for each state
# rather than sleeping a fixed time.
ORPHAN_LIVES = 3.0
PROGRAM = f"""
import os, sys, time
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        time.sleep({ORPHAN_LIVES})
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(30)
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
        # The program itself and its orphaned grandchild, adopted by the agent.
        assert wait_until(lambda: len(children_of(agent.pid)) == 2, ORPHAN_LIVES), \
            children_of(agent.pid)
        # The orphan exits; the agent reaps it (a zombie, state Z, would stay a child).
        assert wait_until(lambda: list(children_of(agent.pid).values()) == ["S"],
                          ORPHAN_LIVES + 10), children_of(agent.pid)
    finally:
        agent.kill()
        agent.wait()
    # Regression: run on a host, the agent linked the host's /dev/log to its socket,
    # and every Swift server started later logged into a dead socket.
    assert os.path.lexists("/dev/log") == had_dev_log
