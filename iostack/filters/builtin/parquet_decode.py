"""Decode a tenant's Parquet row groups in a bounded child process.

``parquet_select`` bounds what it can from a file's footer before reading
(``ParquetLimits``), but the footer is the tenant's word: a page may decode
to far more than its column chunk's ``total_uncompressed_size`` says (a
33 KB file reached 2.1 GB), a dictionary of one 1 MiB string indexed by
every row decodes to a MiB a row, and crafted files make pyarrow's decoder
abort the process (the unit tests' bit-flip fuzzing saw it). On a proxy or
object-server worker that serves every tenant, that is everyone's outage.

Planning is as exposed: pyarrow aborts on some crafted footers when
their statistics are read (one flipped bit of a column chunk's type does
it). So the footer is parsed and the answer planned (``plan_footer``), and
each row group decoded, by a child process (``python -m
iostack.filters.builtin.parquet_decode MEMORY``) that holds no credentials, reads
only what it is sent on stdin and answers on stdout:

- its address space is capped (``RLIMIT_AS``) at what it held after
  importing pyarrow plus ``memory_budget(limits)`` (twice
  ``parquet_max_memory``: the decoded columns and the answer's copy, plus
  the fetched chunks); pyarrow uses the system allocator there, so the
  cap is what the decoder can allocate;
- its CPU time per row group is capped (``RLIMIT_CPU``) at what is left of
  the answer's ``parquet_time_limit``, and the parent waits no longer than
  that on the wall clock either; it runs at niceness ``NICENESS``, so on a
  busy host the worker's other requests get the CPU first;
- a child that dies, overruns or answers out of protocol is killed and
  reaped; the row group's answer is a ``FilterError`` saying which limit
  stopped it (a 422 naming the object, or a cut answer). A child that
  answered cleanly is kept for the next row group (``IDLE`` of them per
  worker process), so only a worker's first decode pays its start
  (~0.3 s, importing pyarrow).

Messages: a request is a 4-byte length, a JSON header (``op``: ``plan``
with the byte range, projection, predicate and limits, or ``decode`` with
the row group, sizes, columns and predicate; CPU seconds) and the raw
footer and column chunks; an answer is one kind byte (``T``: the plan as
JSON, or an Arrow IPC stream of the selected rows; ``E``: a UTF-8 error,
``X``: one after which the child exits), an 8-byte length and the payload.
The worker uses the plan as data: it never parses the tenant's metadata. Nothing sent is
evaluated; the header is parsed with a depth bound.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import math
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa

from iostack import bounded_json
from iostack.filters.builtin.parquet_select import (
    DecodeJob,
    Decoder,
    OverMemory,
    ParquetLimits,
    PlanJob,
    Planner,
    decode_row_group,
    parse_footer,
    plan_footer,
)
from iostack.filters.errors import FilterError, ParamError

IDLE = 1  # children kept per worker process between row groups
NICENESS = 10  # a decode yields the CPU to the worker's other requests
_HEADER = struct.Struct("<I")
_ANSWER = struct.Struct("<cQ")
_SLACK = 64 << 20  # address space for the interpreter's own work beside the budget
_WAIT_SLACK = 5.0  # seconds the parent waits beyond the CPU limit (start, exit)


def memory_budget(limits: ParquetLimits) -> int:
    """Bytes a child may map beyond what importing pyarrow took."""
    return 2 * limits.max_memory + _SLACK


class DecodeStopped(FilterError):
    """The child decoding a row group died, overran a limit or broke the protocol."""


class _Child:
    """One decoding process and its pipes."""

    def __init__(self, memory: int) -> None:
        env = dict(os.environ, ARROW_DEFAULT_MEMORY_POOL="system", OMP_NUM_THREADS="1")
        self.memory = memory
        self.exiting = False  # it said it ends after its answer
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", __name__, str(memory)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, close_fds=True)

    def decode(self, job: DecodeJob, seconds: float) -> pa.Table:
        header = {"op": "decode", "size": job.size, "index": job.index,
                  "columns": job.columns, "where": job.where,
                  "pieces": [[offset, len(data)] for offset, data in job.pieces]}
        payload = self._ask(header, job.footer, [data for _, data in job.pieces], seconds,
                            f"row group {job.index}")
        return pa.ipc.open_stream(payload).read_all()

    def plan(self, job: PlanJob, limits: ParquetLimits, seconds: float) -> dict[str, Any]:
        header = {"op": "plan", "size": job.size, "start": job.start, "end": job.end,
                  "refs": job.refs, "where": job.where, "limits": dataclasses.asdict(limits),
                  "pieces": []}
        answer = bounded_json.loads(self._ask(header, job.footer, [], seconds, "the footer"),
                                    max_depth=6)
        if "param" in answer:
            raise ParamError("parquet_select", answer["param"], answer["reason"])
        return answer

    def _ask(self, header: dict[str, Any], footer: bytes, pieces: list[bytes],
             seconds: float, what: str) -> bytes:
        """The payload of the child's ``T`` answer to one request."""
        header = dict(header, cpu=max(1, math.ceil(seconds)), footer=len(footer))
        encoded = json.dumps(header).encode()
        deadline = time.monotonic() + seconds + _WAIT_SLACK
        try:
            pipe = self.process.stdin
            pipe.write(_HEADER.pack(len(encoded)) + encoded)
            pipe.write(footer)
            for data in pieces:
                pipe.write(data)
            pipe.flush()
            kind, length = _ANSWER.unpack(self._read(_ANSWER.size, deadline))
            if length > self.memory:
                raise DecodeStopped(f"{what}: the decoder answered {length} "
                                    f"bytes, more than it may hold")
            payload = self._read(length, deadline)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._stopped(what) from None
        if kind in (b"E", b"X"):
            self.exiting = kind == b"X"
            raise FilterError(payload.decode(errors="replace"))
        if kind != b"T":
            raise DecodeStopped(f"{what}: the decoder broke its protocol")
        return payload

    def _read(self, size: int, deadline: float) -> bytes:
        """``size`` bytes of the child's answer, waiting until ``deadline`` at most."""
        parts, fd = [], self.process.stdout.fileno()
        poller = _native_select().poll()
        poller.register(fd, select.POLLIN)
        while size:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                self.kill()
                raise DecodeStopped("decoding took longer than the parquet_time_limit")
            data = os.read(fd, min(size, 1 << 20))
            if not data:
                raise EOFError
            parts.append(data)
            size -= len(data)
        return b"".join(parts)

    def _stopped(self, what: str) -> DecodeStopped:
        """Why the child went away, once it has."""
        self.kill()
        code = self.process.returncode
        if code == -signal.SIGXCPU or code == -signal.SIGKILL:
            why = "it used more CPU time than the parquet_time_limit allows"
        elif code is not None and code < 0:
            why = f"the decoder crashed ({signal.Signals(-code).name})"
        else:
            why = f"the decoder exited ({code})"
        return DecodeStopped(f"{what}: {why}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            # Closing flushes what a dead child left unread: the fd is closed anyway.
            with contextlib.suppress(BrokenPipeError):
                pipe.close()


def _native_select() -> Any:
    """``select`` as the OS gives it: decoding runs in a native (tpool) thread, which
    must not wait on eventlet's hub when a Swift server has patched the module."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher.original("select") if patcher else select


class DecoderPool:
    """A worker process's decoding children: taken one per row group, kept when clean."""

    def __init__(self) -> None:
        self._idle: collections.deque[_Child] = collections.deque()  # append/pop: thread-safe

    def decoder(self, limits: ParquetLimits, deadline: float) -> Decoder:
        """A ``Decoder`` for one answer: its row groups share the answer's time limit."""

        def decode(job: DecodeJob) -> pa.Table:
            return self.decode(job, limits, deadline - time.monotonic())

        return decode

    def planner(self, limits: ParquetLimits, deadline: float) -> Planner:
        """A ``Planner`` for one answer, within the answer's time limit."""

        def plan(job: PlanJob) -> dict[str, Any]:
            return self._run(limits, deadline - time.monotonic(),
                             lambda child, seconds: child.plan(job, limits, seconds))

        return plan

    def decode(self, job: DecodeJob, limits: ParquetLimits, seconds: float) -> pa.Table:
        return self._run(limits, seconds, lambda child, left: child.decode(job, left))

    def _run(self, limits: ParquetLimits, seconds: float,
             ask: Callable[[_Child, float], Any]) -> Any:
        """``ask``'s answer from a child of the pool, given ``seconds`` at most."""
        if seconds <= 0:
            raise DecodeStopped(f"the selection took longer than the parquet_time_limit "
                                f"({limits.time_limit:g} s)")
        memory = memory_budget(limits)
        child = self._take(memory)
        reusable = False  # after a clean answer or the file's own error only
        try:
            answer = ask(child, seconds)
            reusable = True
        except DecodeStopped:
            raise
        except FilterError:
            reusable = not child.exiting
            raise
        finally:
            self._give_back(child) if reusable else child.kill()
        return answer

    def _take(self, memory: int) -> _Child:
        while True:
            try:
                child = self._idle.pop()
            except IndexError:
                return _Child(memory)
            if child.memory == memory and child.process.poll() is None:
                return child
            child.kill()

    def _give_back(self, child: _Child) -> None:
        if child.process.poll() is not None:
            child.kill()  # reaps it and closes its pipes
            return
        self._idle.append(child)
        while len(self._idle) > IDLE:
            try:
                self._idle.popleft().kill()
            except IndexError:
                break

    def close(self) -> None:
        while self._idle:
            self._idle.pop().kill()


POOL = DecoderPool()  # one per worker process


# The child's side.

def _serve(memory: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
    from iostack.filters.csv_where import parse_predicate

    os.nice(NICENESS)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped() + memory
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap if hard == resource.RLIM_INFINITY
                                            else min(cap, hard)))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    # The last footer and its metadata: an answer's row groups share one.
    parsed: tuple[bytes, Any] = (b"", None)
    while True:
        head = stdin.read(_HEADER.size)
        if len(head) < _HEADER.size:
            return  # the parent closed the pipe
        request = bounded_json.loads(_exactly(stdin, _HEADER.unpack(head)[0]), max_depth=4)
        footer = _exactly(stdin, request["footer"])
        pieces = [(offset, _exactly(stdin, length)) for offset, length in request["pieces"]]
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = math.ceil(used.ru_utime + used.ru_stime)
        # The soft limit only (SIGXCPU ends the process): a hard one could not be
        # raised again for the next row group without privilege.
        resource.setrlimit(resource.RLIMIT_CPU, (min(spent + request["cpu"], cpu_hard),
                                                 cpu_hard))
        try:
            if parsed[0] != footer:
                parsed = (footer, parse_footer(footer))
            if request["op"] == "plan":
                payload = json.dumps(_plan(parsed[1], footer, request)).encode()
            else:
                table = decode_row_group(parsed[1], request["size"], request["index"],
                                         pieces, request["columns"],
                                         parse_predicate(request["where"]).terms)
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                payload = sink.getvalue().to_pybytes()
            kind = b"T"
        except OverMemory as exc:
            # What the allocator holds now is unknown: answer, and let a new child go on.
            kind, payload = b"X", str(exc).encode()
        except Exception as exc:  # noqa: BLE001 - any failure is this row group's answer
            kind, payload = b"E", str(exc).splitlines()[0].encode() if str(exc) else (
                f"{_what(request)}: {type(exc).__name__}".encode())
        del pieces, footer
        stdout.write(_ANSWER.pack(kind, len(payload)) + payload)
        stdout.flush()
        if kind == b"X":
            return


def _plan(metadata: Any, footer: bytes, request: dict[str, Any]) -> dict[str, Any]:
    """A plan request's answer: the plan, or the request's fault as data."""
    job = PlanJob(footer, request["size"], request["start"], request["end"],
                  request["refs"], request["where"])
    try:
        return plan_footer(metadata, job, ParquetLimits(**request["limits"]))
    except ParamError as exc:
        return {"param": exc.param, "reason": exc.reason}


def _what(request: dict[str, Any]) -> str:
    return "the footer" if request["op"] == "plan" else f"row group {request['index']}"


def _exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _mapped() -> int:
    """Bytes of address space this process has mapped now (``VmSize``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


if __name__ == "__main__":
    try:
        _serve(int(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)
    except EOFError:
        sys.exit(0)
