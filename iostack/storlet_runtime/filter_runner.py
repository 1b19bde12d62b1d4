"""Runs an ``iostack.filters`` filter inside the Storlets sandbox.

The generated storlet of a sandbox-capable filter (``packaging``) calls
``run_filter``; the sandbox sees the ``iostack`` package read-only. Storlet
parameters (each a string, as Storlets passes them):

``mode``
    ``encode`` (write path: original body in, stored body out) or ``decode``
    (read path: stored body in, original body, or a range of it, out).
``params``
    JSON object of the filter's parameters; the filter checks them itself.
``sysmeta``
    ``decode`` only: JSON object the encoder produced (the middleware keeps it
    in object sysmeta; a storlet sees only user metadata).
``range``
    ``decode`` only, optional: ``start-end`` of the decoded body, end exclusive.
``length``
    ``decode`` only, optional: the length of the stored body the server sends.
    At the proxy the body comes through a pipe; with ``length`` the decode
    starts as soon as the bytes it needs have arrived, without it the whole
    body is spooled first (the decoded length, sent before the body, may
    depend on the stored length).
``account``, ``container``, ``object``
    Who the request is about (``FilterContext``).

``encode`` answers with user metadata ``Iostack-Sysmeta`` (JSON) and
``Iostack-Encoded-Length`` (the bytes it is about to write: the server fails
the PUT when the output ends short of it, say because the process died).
Storlets sends metadata before the body while encoders know their sysmeta
only at the end, so the encoded body is spooled to the sandbox's private
``/tmp`` first (bounded by ``sandbox_tmp_size``). ``decode`` answers with
``Iostack-Length`` (the decoded length) and streams.

A filter that is not declared ``sandboxable`` is refused here too.

The storlet daemon imports the storlet once and forks its request processes
from it, so ``load_filter`` runs at import: the filter library (zstandard,
cryptography...) is loaded once, not on every request. Once a request's
output is complete, ``end_request_process`` ends that forked process with
``os._exit`` (upstream's ``sys.exit()`` tears the whole interpreter down, tens
of milliseconds of CPU per request on the cores the Swift servers use), or,
in a process the daemon keeps for further requests of this storlet
(``RequestProcess``), returns to the daemon's loop.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from iostack.filters.base import FilterContext, FilterSpec
from iostack.filters.library import get_filter
from iostack.storlet_runtime.pipes import PIPE_PIECE, widen

CHUNK = 64 * 1024
# The storlet daemon imports this module (through the storlet) before it forks a process
# per request, so any other pid is one of those per-request processes.
_DAEMON_PID = os.getpid()


class FdSource:
    """A ``ByteSource`` over the storlet's input: the object file itself, or a pipe.

    A pipe (the proxy streams the object in) is copied to the sandbox's
    ``/tmp`` as it is read, so a view can read any range of it. With the
    body's ``length`` known, a read waits only for the bytes it needs;
    otherwise the whole body is spooled first to learn its length.
    """

    def __init__(self, fd: int, length: int | None = None) -> None:
        self._pipe: int | None = None
        try:
            self.length = os.lseek(fd, 0, os.SEEK_END)
            self.fd = fd
            self._spool = None
        except OSError:
            self._spool = tempfile.TemporaryFile(dir="/tmp")  # the sandbox's own
            self.fd = self._spool.fileno()
            self._pipe, self._spooled = fd, 0
            widen(fd)  # the server's writes block less, and each read takes more
            if length is None:
                self._fill(None)
                length = self._spooled
            self.length = length

    def _fill(self, until: int | None) -> None:
        """Spool from the pipe until ``until`` bytes (None: all) arrived or it ended."""
        while self._pipe is not None and (until is None or self._spooled < until):
            piece = os.read(self._pipe, PIPE_PIECE)
            if not piece:
                self._pipe = None
                break
            self._spool.write(piece)
            self._spooled += len(piece)
        if self._spool is not None:
            self._spool.flush()

    def drain(self) -> None:
        """Read (and drop) what the server still sends, then drop the spool.

        The server must never block on a full pipe; and the request's process
        may serve another request (``RequestProcess``), so nothing of this one
        stays open.
        """
        while self._pipe is not None:
            if not os.read(self._pipe, PIPE_PIECE):
                self._pipe = None
        if self._spool is not None:
            self._spool.close()

    def read(self, start: int, end: int) -> Iterator[bytes]:
        while start < end:
            self._fill(min(end, start + PIPE_PIECE))
            chunk = os.pread(self.fd, min(PIPE_PIECE, end - start), start)
            if not chunk:
                raise ValueError(f"stored body ended at {start}, before {end}")
            start += len(chunk)
            yield chunk


def _json_param(params: dict[str, str], key: str) -> dict[str, Any]:
    value = json.loads(params.get(key) or "{}")
    if not isinstance(value, dict):
        raise ValueError(f"parameter {key!r} must be a JSON object")
    return value


def _range(text: str | None, length: int) -> tuple[int, int]:
    if not text:
        return 0, length
    start, _, end = text.partition("-")
    first, last = int(start), min(int(end), length)
    if not 0 <= first <= last:
        raise ValueError(f"bad range {text!r} for a body of {length} bytes")
    return first, last


def load_filter(name: str) -> FilterSpec:
    spec = get_filter(name)
    if not spec.metadata.sandboxable:
        raise ValueError(f"filter {name!r} is not declared sandboxable")
    return spec


def run_filter(spec: FilterSpec, in_file: Any, out_file: Any, params: dict[str, str]) -> None:
    context = FilterContext(account=params.get("account", ""),
                            container=params.get("container", ""), obj=params.get("object", ""))
    mode = params.get("mode")
    if mode == "encode":
        encoder = spec.encoder(_json_param(params, "params"), context)
        with tempfile.TemporaryFile(dir="/tmp") as spool:  # the sandbox's own
            for piece in encoder.encode(iter(lambda: in_file.read(CHUNK), b"")):
                spool.write(piece)
            out_file.set_metadata({"Iostack-Sysmeta": json.dumps(encoder.sysmeta()),
                                   "Iostack-Encoded-Length": str(spool.tell())})
            spool.seek(0)
            widen(out_file.fileno())
            shutil.copyfileobj(spool, out_file, PIPE_PIECE)
    elif mode == "decode":
        source = FdSource(in_file.fileno(), int(params["length"]) if params.get("length") else None)
        try:
            view = spec.open_view(source, _json_param(params, "sysmeta"), context)
            start, end = _range(params.get("range"), view.length)
            out_file.set_metadata({"Iostack-Length": str(view.length)})
            widen(out_file.fileno())
            for piece in view.read(start, end):
                out_file.write(piece)
            out_file.close()  # the answer is complete; the rest of the input is not needed
        finally:
            source.drain()
    else:
        raise ValueError(f"mode must be encode or decode, not {mode!r}")


class RequestProcess:
    """What the storlet daemon (``daemon.PreforkDaemon``) decided for this request process.

    ``kept``: the process serves the next request of the same storlet (in the
    same sandbox) once this one completed; ``completed``: this request did.
    """

    kept = False
    completed = False


def end_request_process(storlet_logger: Any) -> None:
    """End the storlet daemon's per-request process now, or hand it back for the next request.

    Call it after the storlet closed its input and output files (the answer is
    complete). Upstream ends the process with ``sys.exit()``: a full
    interpreter teardown with the filter library loaded (~35 ms of CPU,
    competing with the Swift servers for the same cores) that nobody waits
    for. Nothing is lost by skipping it: the storlet's log and stdio are
    flushed here, and the spool files in ``/tmp`` are anonymous. An error
    never gets here, so upstream still logs it before its own exit. In a
    process the daemon keeps (``RequestProcess.kept``) it returns instead,
    and the daemon hands it the next request. In the daemon itself (or a
    test) it does nothing.
    """
    if os.getpid() == _DAEMON_PID:
        return
    storlet_logger.close()
    sys.stdout.flush()
    sys.stderr.flush()
    if RequestProcess.kept:
        RequestProcess.completed = True
        return
    os._exit(0)
