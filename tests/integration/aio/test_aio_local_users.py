"""What another uid on the host reaches of the stack: no port beyond loopback (RabbitMQ's
Erlang distribution port listened on 0.0.0.0), and no stored object (every .data file
under srv/node was readable by ``nobody``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from iostack.aio.processes import ProcessManager

pytestmark = pytest.mark.integration

LOOPBACK = ("127.", "[::1]", "::1")


def group_pids(state_dir: Path) -> set[int]:
    """Every live process in the process groups of the processes ``state_dir`` started."""
    manager = ProcessManager(state_dir)
    groups = {found.pid for name in manager.names() if (found := manager.find(name))}
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[2]) in groups:  # its process group
                pids.add(int(entry.name))
    return pids


def listening(pids: set[int]) -> list[tuple[str, str]]:
    """(local address, process) of every TCP listener owned by ``pids``."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if int(pid) in pids:
                found.append((fields[3], name))
    return found


def test_the_stack_and_its_services_listen_on_loopback_only(aio, shared_services):
    shared_services.services.ensure("rabbitmq", "")
    pids = group_pids(Path(aio["state_dir"])) | group_pids(shared_services.state_dir)
    assert os.getpid() not in pids
    sockets = listening(pids)
    names = {name for _, name in sockets}
    assert {"beam.smp", "epmd", "redis-server", "memcached"} <= names, sockets
    assert [s for s in sockets if not s[0].startswith(LOOPBACK)] == []


def test_nobody_reads_a_stored_object_or_a_log(aio, swift_for):
    tenant = swift_for("t1")
    tenant.put_container("local-users")
    tenant.put_object("local-users", "secret", b"tenant bytes")
    objects = Path(aio["state_dir"]) / "srv"
    assert any(objects.rglob("*.data"))  # as root
    nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    found = subprocess.run([*nobody, "find", str(objects), "-name", "*.data"],
                           capture_output=True, text=True, check=False)
    assert ".data" not in found.stdout and "Permission denied" in found.stderr
    logs = sorted(map(str, (Path(aio["state_dir"]) / "log").glob("*.log")))
    assert logs
    read = subprocess.run([*nobody, "cat", *logs], capture_output=True, text=True, check=False)
    assert read.returncode != 0 and read.stdout == ""
