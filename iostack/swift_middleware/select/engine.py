"""Answer one GET with a chain of record selections (``csv_select``, ``grep``).

The engine behind ``iostack_select`` on proxies and on object servers. It
reads the object through a ``fetch(byte_range)`` callable, so the same code
selects from a proxy's view of an object or from an object server's local
copy:

- from the object's start, one GET of the whole object; its first record is
  handed to each selection's ``begin`` (a CSV header names the columns);
- for ``Range: bytes=S-E``, a GET of the first line (``bytes=0-max_first_line``)
  when a selection needs it, and one of ``bytes=S-1-``: the records that
  *start* in ``[S, E]`` are selected (``iostack.filters.records``).

Errors before the first selected byte raise ``SelectError`` or ``ParamError``
so the caller can answer with a status; a failure later raises from the
answer's iterator and cuts it short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import eventlet
from eventlet import tpool
from swift.common.swob import Request, Response
from swift.common.utils import close_if_possible

from iostack.filters.base import Selection
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.output import CONTENT_TYPES
from iostack.filters.records import RecordBlocks, fetch_start, prepend
from iostack.swift_middleware.streams import closing

Fetch = Callable[[str | None], Response]


class SelectError(Exception):
    """An answer that cannot be given: ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_chain(selections: list[Selection], names: list[str]) -> None:
    """``SelectError(400)`` for a chain whose parts cannot feed each other: a
    random-access reader (``parquet_select``) reads the object itself, and
    only the last selection may answer in a binary format (Arrow)."""
    if len(selections) > 1 and any(s.random_access for s in selections):
        raise SelectError(400, f"{' then '.join(names)}: a Parquet selection cannot be "
                               f"chained with another record filter (a policy's or the "
                               f"request's)")
    for selection, name in zip(selections[:-1], names[:-1], strict=True):
        if selection.content_type == CONTENT_TYPES["arrow"]:
            raise SelectError(400, f"{name}: only the last record filter of a chain may "
                                   f"answer in Arrow (the next one reads text)")


def record_range(req: Request) -> tuple[int, int | None]:
    """``(start, end)`` of the request's ``Range``, ``end`` inclusive or None; (0, None) without."""
    header = req.headers.get("Range")
    if not header:
        return 0, None
    units, _, spec = header.partition("=")
    first, dash, last = spec.strip().partition("-")
    if units.strip().lower() != "bytes" or "," in spec or not dash or not first.strip():
        raise SelectError(400, f"Range {header!r}: a selection takes one range "
                               f"'bytes=start-[end]'")
    try:
        start, end = int(first), int(last) if last.strip() else None
    except ValueError:
        raise SelectError(400, f"Range {header!r} is not 'bytes=start-[end]'") from None
    if start < 0 or (end is not None and end < start):
        raise SelectError(400, f"Range {header!r} is empty")
    return start, end


def off_hub(keepalive: float | None, func: Callable[..., Any],
            *args: Any) -> Generator[bytes, None, Any]:
    """``func(*args)`` run in a native thread (pyarrow, and the Parquet decoder's
    pipes, release the GIL: the hub keeps serving other requests meanwhile);
    its result is the generator's return value. With ``keepalive``, ``b""`` is
    yielded every ``keepalive`` seconds it runs, so a peer with a read timeout
    (a proxy reading an object server's frames) hears something during one
    long decode too."""
    if keepalive is None:
        return tpool.execute(func, *args)
    running = eventlet.spawn(tpool.execute, func, *args)
    while True:
        with eventlet.Timeout(keepalive, False):  # silent: ends the block, nothing raised
            return running.wait()
        yield b""


def prefixed(prefix: bytes, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` with ``prefix`` (a CSV header, an Arrow schema) joined to the first
    non-empty one: keepalives before it pass alone, so nothing of an answer leaves
    before its first block, and that block's errors still get a status."""
    for chunk in chunks:
        if prefix and chunk:
            chunk, prefix = prefix + chunk, b""
        yield chunk
    if prefix:
        yield prefix


@dataclass
class Answer:
    """A selection under way: the object GET it reads and the selected bytes.

    ``chunks`` starts with the answer's first bytes (already computed, so
    errors there were raised before this existed) and closes ``source``.
    """

    source: Response
    chunks: Iterator[bytes]


class Selecting:
    """One GET answered by a chain of selections (a policy's, then the request's).

    ``keepalive`` (seconds): when set, ``chunks`` yields ``b""`` after that
    long without selected bytes, so a caller streaming to a peer with a read
    timeout can send something (the object stage does). ``max_record``
    (bytes): a longer record makes the object unreadable for the selection
    (``422`` naming the limit, or a cut answer).
    """

    def __init__(self, fetch: Fetch, path: str, selections: list[Selection],
                 names: list[str], max_first_line: int, keepalive: float | None = None,
                 max_record: int | None = None) -> None:
        self.fetch = fetch
        self.path = path
        self.selections = selections
        self.names = names
        self.max_first_line = max_first_line
        self.keepalive = keepalive
        self.max_record = max_record
        self.skip_first = any(s.skips_first_record for s in selections)
        # A range's answer still needs the object's first record (a header, a schema).
        self.read_first = self.skip_first or any(s.needs_first_record for s in selections)

    def _first_line(self, chunks: Iterator[bytes]) -> tuple[bytes | None, bytes]:
        """The object's first record and what was read after it."""
        held = b""
        for chunk in chunks:
            held += chunk
            newline = held.find(b"\n")
            if newline >= 0:
                return held[: newline + 1], held[newline + 1:]
            if len(held) > self.max_first_line:
                raise SelectError(422, f"the first line of {self.path} is longer than "
                                       f"{self.max_first_line} bytes")
        return (held or None), b""

    def _begin(self, first: bytes | None, at_start: bool) -> bytes:
        """Run every selection's ``begin``; return what the answer starts with (the
        last one's: a CSV header at the object's start, an Arrow schema always)."""
        prefix = b""
        last = len(self.selections) - 1
        for i, selection in enumerate(self.selections):
            prefix = selection.begin(first, at_start=at_start if i == last else True)
            first = prefix or first  # the next one sees the previous one's header
        return prefix

    def _blocks(self, start: int, end: int | None) -> tuple[Response, bytes | None,
                                                            Iterable[bytes]]:
        """The GET being read, the object's first record, and record blocks of the range."""
        if start == 0:
            resp = self.fetch(None)
            if not resp.is_success:
                return resp, None, ()
            body = iter(resp.app_iter)
            first, after = self._first_line(body)
            records = prepend(after if self.skip_first else (first or b"") + after, body)
            shift = len(first or b"") if self.skip_first else 0
            if end is not None and end < shift:
                return resp, first, ()
            return resp, first, RecordBlocks(0, None if end is None else end - shift,
                                             max_record=self.max_record).blocks(records)
        first = None
        if self.read_first:
            head = self.fetch(f"bytes=0-{self.max_first_line}")
            if head.status_int != 416:  # 416: an empty object, no first line
                if not head.is_success:
                    return head, None, ()
                try:
                    first, _ = self._first_line(iter(head.app_iter))
                finally:
                    close_if_possible(head.app_iter)
        resp = self.fetch(f"bytes={fetch_start(start)}-")
        if resp.status_int == 416:  # the range starts past the end: no records
            close_if_possible(resp.app_iter)
            return Response(status=200, app_iter=[], content_type="text/plain"), first, ()
        return resp, first, RecordBlocks(start, end, max_record=self.max_record).blocks(
            resp.app_iter)

    def run(self, start: int, end: int | None) -> Answer | Response:
        """The answer for records starting in ``[start, end]``, or the object's
        own non-success response (404, 304, 412 ...) to pass on."""
        resp, first, blocks = self._blocks(start, end)
        if not resp.is_success:
            return resp
        answer = self._answer_chunks(blocks)
        try:
            # A first record parsed off the hub (a JSON schema); a ParamError: 400.
            prefix = tpool.execute(self._begin, first, start == 0)
            # Errors in the first block still get a status; on the object stage a
            # keepalive may come first, and ``prefixed`` keeps the prefix back for it.
            head = next(answer, b"")
        except FilterError as exc:
            close_if_possible(resp.app_iter)
            if isinstance(exc, ParamError):
                raise
            raise SelectError(422, f"{', '.join(self.names)} cannot read "
                                   f"{self.path}: {exc}") from None
        return Answer(resp, closing(prefixed(prefix, prepend(head, answer)), resp.app_iter))

    def _select(self, block: bytes) -> bytes:
        try:
            for selection in self.selections:
                block = selection.select(block)
                if not block:
                    break
        except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise FilterError(str(exc).splitlines()[0]) from exc
        return block

    def _answer_chunks(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        quiet_since = time.monotonic()
        for block in blocks:
            # On a native thread: pyarrow parses without the GIL, so one worker
            # selects for concurrent requests on several cores while its hub
            # keeps moving other requests' bytes.
            block = yield from off_hub(self.keepalive, self._select, block)
            if block:
                quiet_since = time.monotonic()
                yield block
            elif self.keepalive is not None and time.monotonic() - quiet_since > self.keepalive:
                quiet_since = time.monotonic()
                yield b""
        tail = self.selections[-1].end()  # an Arrow stream's end marker
        if tail:
            yield tail
