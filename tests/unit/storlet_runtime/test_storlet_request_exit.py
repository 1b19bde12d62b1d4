"""The storlet daemon's per-request process ends with ``os._exit`` once its answer is complete."""

from __future__ import annotations

import atexit
import os

import pytest

from iostack.storlet_runtime.filter_runner import end_request_process


class BufferedLog:
    """Like Storlets' ``StorletLogger``: a buffered file that must be closed to be written."""

    def __init__(self, fd: int) -> None:
        self.file = os.fdopen(fd, "wb")

    def info(self, msg: str) -> None:
        self.file.write(msg.encode())

    def close(self) -> None:
        self.file.close()


# Another test module may have imported eventlet, which warns about any fork.
@pytest.mark.filterwarnings("ignore:Using fork")
def test_in_a_forked_process_it_flushes_the_log_and_exits_without_teardown():
    log_r, log_w = os.pipe()
    mark_r, mark_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the "per-request process"
        try:
            os.close(log_r)
            os.close(mark_r)
            # A sys.exit() would run this (interpreter teardown); os._exit does not.
            atexit.register(os.write, mark_w, b"teardown")
            log = BufferedLog(log_w)
            log.info("done")
            end_request_process(log)
            os.write(mark_w, b"returned")
        finally:
            os._exit(3)
    os.close(log_w)
    os.close(mark_w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(log_r, "rb") as log, os.fdopen(mark_r, "rb") as mark:
        assert log.read() == b"done"
        assert mark.read() == b""
    assert os.waitstatus_to_exitcode(status) == 0


def test_in_the_process_that_imported_it_it_returns():
    r, w = os.pipe()
    log = BufferedLog(w)
    try:
        end_request_process(log)  # the daemon itself (or a test): nothing happens
        log.info("still open")
    finally:
        log.close()
    with os.fdopen(r, "rb") as f:
        assert f.read() == b"still open"
