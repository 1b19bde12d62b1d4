"""Answer one GET with a Parquet selection, reading the object by byte ranges.

The random-access counterpart of ``selecting.Selecting`` (same ``run``
contract, so proxies and object servers drive either): ``parquet_select``
plans from the footer what to read (``iostack.filters.builtin.parquet_select``),
and this reads exactly that through ``fetch(byte_range)``:

- ``bytes=-65536``: the footer (and the object's size, from
  ``Content-Range``); a second range when the metadata is larger;
- per planned row group, one range per run of needed column chunks.

On an object server ``fetch`` reads the local disk, so the column chunks
not needed never leave it (the IOStack paper's point, for Parquet). The
first row group is read before ``run`` returns, so a corrupt file still
gets a status (``422`` naming the object); a failure later raises
``FilterError`` from the answer's iterator, which the callers turn into an
error frame or a cut answer. ``ParquetLimits.time_limit`` is checked
between fetches and row groups, and the footer is planned and row groups
decoded in a bounded child process (``iostack.filters.builtin.parquet_decode``)
unless ``parquet_decode_in_child = false`` (which leaves this worker exposed
to files that abort pyarrow).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from eventlet import tpool
from swift.common.swob import Response
from swift.common.utils import close_if_possible

from iostack.filters.base import Selection
from iostack.filters.builtin.parquet_decode import POOL
from iostack.filters.builtin.parquet_select import (
    FOOTER_PROBE,
    ParquetLimits,
    ParquetSelection,
    RowGroupRead,
    footer_length,
)
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.records import prepend
from iostack.swift_middleware.select.engine import (
    Answer,
    Fetch,
    SelectError,
    Selecting,
    check_chain,
    off_hub,
    prefixed,
)


def _body(resp: Response, limit: int) -> bytes:
    """A ranged response's body, at most ``limit`` bytes read."""
    parts, held = [], 0
    try:
        for chunk in resp.app_iter:
            parts.append(chunk)
            held += len(chunk)
            if held > limit:
                break
    finally:
        close_if_possible(resp.app_iter)
    return b"".join(parts)


def object_size(resp: Response) -> int:
    """The whole object's size, from a ranged GET's ``Content-Range`` (or a 200's length)."""
    content_range = resp.headers.get("Content-Range", "")
    if "/" in content_range:
        return int(content_range.rsplit("/", 1)[1])
    return int(resp.content_length or 0)


class ParquetSelecting:
    """One GET answered by a ``parquet_select`` over ranged reads of the object."""

    def __init__(self, fetch: Fetch, path: str, selection: ParquetSelection, names: list[str],
                 limits: ParquetLimits, keepalive: float | None = None) -> None:
        self.fetch = fetch
        self.path = path
        self.selection = selection
        self.names = names
        self.limits = limits
        self.keepalive = keepalive
        self.bytes_read = 0  # of the object, footer included: what left the disk

    def _failed(self, exc: FilterError) -> SelectError:
        return SelectError(422, f"{', '.join(self.names)} cannot read {self.path}: {exc}")

    def _range(self, offset: int, length: int) -> bytes:
        resp = self.fetch(f"bytes={offset}-{offset + length - 1}")
        if not (resp.status_int == 206 or (resp.status_int == 200 and offset == 0)):
            close_if_possible(resp.app_iter)
            raise FilterError(f"reading bytes {offset}+{length}: the object answered "
                              f"{resp.status}")
        data = _body(resp, length)[:length]
        if len(data) != length:
            raise FilterError(f"bytes {offset}+{length}: got {len(data)} (the object changed?)")
        self.bytes_read += length
        return data

    def run(self, start: int, end: int | None) -> Answer | Response:
        """The answer for row groups starting in ``[start, end]``, or the object's own
        non-success response to pass on."""
        deadline = time.monotonic() + self.limits.time_limit
        tail = self.fetch(f"bytes=-{FOOTER_PROBE}")
        if tail.status_int == 416:  # an empty object
            close_if_possible(tail.app_iter)
            raise self._failed(FilterError("not a Parquet file (0 bytes)"))
        if not tail.is_success:
            return tail
        try:
            size = object_size(tail)
            footer = _body(tail, FOOTER_PROBE)[-FOOTER_PROBE:]
            self.bytes_read += len(footer)
            need = footer_length(footer, size, self.limits)
            if need > len(footer):
                footer = self._range(size - need, need - len(footer)) + footer
            # Up to parquet_max_footer of metadata parsed off the hub, in the bounded
            # child: a crafted footer can abort pyarrow's parser.
            planner = (POOL.planner(self.limits, deadline) if self.limits.decode_in_child
                       else None)
            plan = tpool.execute(self.selection.plan, footer[-need:], size, start, end,
                                 self.limits, planner)
            prefix = self.selection.begin(None, start == 0)
            chunks = self._chunks(plan, deadline)
            head = next(chunks, b"")
        except ParamError:
            raise
        except (FilterError, ValueError) as exc:
            raise self._failed(FilterError(str(exc))) from None
        return Answer(tail, prefixed(prefix, prepend(head, chunks)))

    def _chunks(self, plan: list[RowGroupRead], deadline: float) -> Iterator[bytes]:
        quiet_since = time.monotonic()
        decode = POOL.decoder(self.limits, deadline) if self.limits.decode_in_child else None
        for group in plan:
            pieces = []
            for offset, length in group.ranges:
                self._check_time(deadline)
                pieces.append((offset, self._range(offset, length)))
            self._check_time(deadline)
            # Decoding (in a bounded child, or here) and writing happen off the hub.
            out = yield from off_hub(self.keepalive, self.selection.read_row_group, group,
                                     pieces, decode)
            if out:
                quiet_since = time.monotonic()
                yield out
            elif self.keepalive is not None and time.monotonic() - quiet_since > self.keepalive:
                quiet_since = time.monotonic()
                yield b""
        tail = self.selection.end()
        if tail:
            yield tail

    def _check_time(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise FilterError(f"the selection took longer than the parquet_time_limit "
                              f"({self.limits.time_limit:g} s)")


def selecting_for(fetch: Fetch, path: str, selections: list[Selection], names: list[str],
                  max_first_line: int, limits: ParquetLimits,
                  keepalive: float | None = None,
                  max_record: int | None = None) -> Selecting | ParquetSelecting:
    """The engine for a chain: by ranges for a Parquet selection, by records otherwise
    (``SelectError(400)`` for a chain that cannot run)."""
    check_chain(selections, names)
    first = selections[0]
    if isinstance(first, ParquetSelection):
        return ParquetSelecting(fetch, path, first, names, limits, keepalive)
    return Selecting(fetch, path, selections, names, max_first_line, keepalive, max_record)
