"""A reconcile pass's progress where operators look: ``aio status`` and the console."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import requests

pytestmark = pytest.mark.integration


def _aio_status(aio) -> str:
    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "aio", "status", "--state-dir", aio["state_dir"]],
        capture_output=True, text=True, timeout=60, check=False).stdout


def _console_policies(aio) -> str:
    console = requests.Session()
    logged = console.post(f"{aio['controller_url']}/ui/login", timeout=30,
                          data={"token": aio["admin_token"], "account": ""})
    assert logged.status_code == 200, logged.text  # followed to the policies page
    return console.get(f"{aio['controller_url']}/ui/policies", timeout=30).text


def test_a_running_pass_shows_in_aio_status_and_the_console(
        aio, t1, container, policies, iostack, iostack_json):
    for n in range(10):
        t1.put_object(container, f"log-{n}", b"2026-11-26,alice,login\n" * 500)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    target = f"AUTH_t1/{container}"
    # Slow enough (50 s for all) that it still runs when a loaded machine's CLI looks; the
    # test stops it early.
    iostack_json("reconcile", "start", target, "--objects-per-second", "0.2")
    deadline = time.monotonic() + 120
    while iostack_json("reconcile", "status", target)["scanned"] < 1:
        assert time.monotonic() < deadline, "the pass did not start scanning"
        time.sleep(0.5)
    status = iostack_json("reconcile", "status", target)
    shown = _aio_status(aio)
    (row,) = [line for line in shown.splitlines() if line.startswith(f"reconcile {target}")]
    assert "running: " in row and "/10 scanned" in row and f"(pid {status['pid']})" in row, row
    page = _console_policies(aio)
    assert f'data-target="{target}" data-state="running"' in page
    assert "<progress max=\"10\"" in page

    stopped = iostack_json("reconcile", "stop", target)
    assert stopped["state"] == "stopped"
    (row,) = [line for line in _aio_status(aio).splitlines()
              if line.startswith(f"reconcile {target}")]
    assert "stopped: " in row and "pid" not in row, row
    assert f'data-target="{target}" data-state="stopped"' in _console_policies(aio)
