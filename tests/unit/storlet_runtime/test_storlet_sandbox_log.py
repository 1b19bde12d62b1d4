"""A scope's ``sandbox.log`` (what tenant code logs) is its owner's alone."""

from __future__ import annotations

import stat

from iostack.storlet_runtime.host.sandbox import open_private_log


def test_a_new_sandbox_log_is_private_from_creation(tmp_path, no_chmod):
    """Regression: the log was opened with open(path, "ab"): 0644 under the usual
    umask (0666 under umask 0), readable by every local user."""
    path = tmp_path / "AUTH_t1" / "sandbox.log"
    path.parent.mkdir(mode=0o700)
    with open_private_log(path) as log:
        log.write(b"tenant line\n")
    with open_private_log(path) as log:
        log.write(b"appended\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b"tenant line\nappended\n"


def test_a_log_left_readable_by_an_earlier_version_is_narrowed(tmp_path):
    path = tmp_path / "sandbox.log"
    path.write_bytes(b"old\n")
    path.chmod(0o644)
    with open_private_log(path) as log:
        log.write(b"new\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b"old\nnew\n"
