"""The reconcile daemon's pure parts: what a write-back keeps, throttling, progress."""

from __future__ import annotations

import pytest
from swift.common.utils import Timestamp

from iostack.atrest.inspect import stored_object
from iostack.atrest.reconcile import (
    ReconcileState,
    Throttle,
    _put_headers,
    load_state,
    save_state,
    state_path,
)
from iostack.atrest.scan import Target

STORED = {"Content-Length": "76", "Etag": "stored", "Content-Type": "text/csv",
          "X-Backend-Timestamp": "1795717198.61242", "X-Object-Meta-Owner": "alice",
          "X-Delete-At": "1900000000", "Content-Disposition": "inline",
          "X-Object-Sysmeta-Iostack-Pipeline": "[]", "X-Object-Sysmeta-Iostack-Size": "900",
          "X-Object-Sysmeta-Iostack-Etag": "tenant",
          "X-Object-Sysmeta-Container-Update-Override-Etag": "tenant",
          "X-Object-Sysmeta-S3api-Upload-Id": "u1", "X-Trans-Id": "tx"}


def test_a_write_back_keeps_the_tenants_attributes_and_sorts_just_after_the_object():
    stored = stored_object("a", "c", "o", STORED)
    headers = {k.lower(): v for k, v in _put_headers(stored, STORED, 5.0).items()}
    when = Timestamp(headers["x-timestamp"])
    assert when.offset == 1 and when.normal == "1795717198.61242"
    assert Timestamp("1795717198.61242") < when < Timestamp("1795717198.61243")
    assert headers["etag"] == "tenant" and headers["content-length"] == "900"
    assert headers["content-type"] == "text/csv"
    assert headers["x-object-meta-owner"] == "alice" and headers["x-delete-at"] == "1900000000"
    assert headers["content-disposition"] == "inline"
    assert headers["x-backend-iostack-object-age"] == "5.0"
    assert headers["x-object-sysmeta-s3api-upload-id"] == "u1"
    assert not any(k.startswith(("x-object-sysmeta-iostack", "x-object-sysmeta-container"))
                   for k in headers)
    assert "x-trans-id" not in headers


def test_a_second_reencode_raises_the_offset_again():
    once = stored_object("a", "c", "o", STORED | {"X-Backend-Timestamp":
                                                  "1795717198.61242_0000000000000001"})
    assert Timestamp(_put_headers(once, STORED, 0.0)["X-Timestamp"]).offset == 2


def test_throttle_rests_for_its_duty_cycle_and_rates():
    assert Throttle().rest(0.2, 10) == 0
    assert Throttle(duty=0.5).rest(0.2, 10) == 0.2
    assert Throttle(duty=0.25).rest(0.1, 10) == 0.30000000000000004
    assert Throttle(objects_per_second=2).rest(0.1, 10) == 0.4
    assert Throttle(bytes_per_second=1000).rest(0.5, 2000) == 1.5


def test_progress_survives_a_restart_and_gives_an_eta(tmp_path):
    path = state_path(tmp_path, Target("AUTH_t1", "logs"))
    assert path.name == "AUTH_t1_logs.json"
    state = ReconcileState("AUTH_t1/logs", scanned=30, total=90, seconds=10.0,
                           position=["AUTH_t1", "logs", "o29"])
    save_state(path, state)
    again = load_state(path)
    assert again.position == ["AUTH_t1", "logs", "o29"] and again.scanned == 30
    data = again.to_json()
    assert data["objects_per_second"] == 3.0 and data["eta_seconds"] == 20.0
    assert load_state(tmp_path / "none.json") is None


def _start(tmp_path, target: Target) -> dict:
    """``reconcile start --wait --json`` of ``target`` (its daemon is whatever Popen is)."""
    import argparse
    import types

    from iostack.atrest import cli

    ctx = types.SimpleNamespace(swift_dir=tmp_path,
                                client=types.SimpleNamespace(url="http://127.0.0.1:1", token=""))
    args = argparse.Namespace(target=str(target), state_dir=str(tmp_path), duty=1.0,
                              objects_per_second=None, bytes_per_second=None, now=None,
                              wait=True, json=True)
    return cli.reconcile_start(ctx, args)


def test_start_accepts_a_daemon_that_finished_between_two_looks(tmp_path, monkeypatch):
    """A small target's pass can end before ``start`` first sees its record."""
    from iostack.atrest import cli

    target = Target.parse("AUTH_t1/small")
    path = state_path(tmp_path, target)

    class FinishedDaemon:
        pid = 4242

        def __init__(self, *args, **kwargs):
            pass

        def poll(self):  # the pass completes, records itself and exits, all at once
            save_state(path, ReconcileState(target=str(target), state="done", pid=self.pid))
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", FinishedDaemon)
    final = _start(tmp_path, target)
    assert final["state"] == "done" and final["pid"] == 4242


def test_start_accepts_a_pass_that_ended_and_cleared_its_pid_before_the_first_look(
        tmp_path, monkeypatch):
    """The daemon's last save clears its pid: a finished record newer than the launch counts,
    an older one (a previous pass) does not."""
    from iostack.atrest import cli

    target = Target.parse("AUTH_t1/tiny")
    path = state_path(tmp_path, target)
    save_state(path, ReconcileState(target=str(target), state="done", updated=1.0))

    class Daemon:
        pid, finishes, returncode = 4343, True, 0

        def __init__(self, *args, **kwargs):
            pass

        def poll(self):
            if Daemon.finishes:
                save_state(path, ReconcileState(target=str(target), state="done", pid=None))
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", Daemon)
    assert _start(tmp_path, target)["state"] == "done"
    save_state(path, ReconcileState(target=str(target), state="done", updated=1.0))
    Daemon.finishes = False  # exits without a record of this launch
    with pytest.raises(cli.Refused, match="exited at once"):
        _start(tmp_path, target)
