"""IOStack record selection: answer a GET with the rows, columns or lines a query needs.

Record filters (``csv_select``, ``grep``: ``FilterSpec.selects_records``)
run here, at the proxy, on the object as its tenant stored it (the
``iostack`` middleware below has already undone compression or encryption).
Analytics jobs then receive only what they asked for: the IOStack paper's
Spark pushdown. They are invoked

- per request, like a storlet call: ``X-Iostack-Filter: csv_select`` with one
  ``X-Iostack-Param-<name>: <value>`` header per parameter
  (``X-Iostack-Param-Columns: user_id``), or the query string
  ``?iostack-filter=csv_select&iostack-columns=user_id`` (TempURL users
  cannot set headers);
- by policy: ``FOR CONTAINER t2/logs DO SET CSV_SELECT WITH columns=user_id``
  makes every GET of those objects a selection. A request's own filter then
  runs on the policy's answer (it can narrow it, never widen it).

A ``Range: bytes=S-E`` (one range; ``E`` may be omitted) selects the records
that *start* in it, so that byte-range splits of an object never lose or
repeat a record (``iostack.filters.records``); the answer is ``200`` with
the selection, never a ``206``. Answers are streamed: no Content-Length, no
ETag (they are not the object), ``X-Iostack-Selected`` names the filters.
Bad parameters, unknown columns and malformed predicates get ``400`` naming
the problem, before any byte of the object is sent; an object that is not
valid for the filter (a broken quote in its first MiB) gets ``422``; a
failure further on cuts the answer short, and never passes as complete.
HEAD requests are not selected (the size of an answer is unknown).

Place it right after ``iostack_qos`` in the proxy pipeline (after auth,
above ``copy``/``slo``/``dlo``/``iostack``): bandwidth limits then shape
the selected bytes, and large objects are selected whole.

Configuration (``[filter:iostack_select]``)::

    use = egg:iostack#iostack_select
    max_first_line = 1048576   # bytes: a longer first line (CSV header) is refused

plus the policy-reader options of ``policies`` (``redis_url``, ``key_prefix``...).
A failed policy lookup is logged and the request is served without the
policy's selection: policies here shape answers, they are not access control.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from eventlet import tpool
from swift.common.swob import HTTPBadRequest, Request, Response, wsgify
from swift.common.utils import close_if_possible, split_path
from swift.common.wsgi import make_subrequest

from iostack.controller.resolve import RequestInfo
from iostack.filters.base import FilterContext, FilterSpec, Selection
from iostack.filters.errors import FilterError, ParamError, UnknownFilterError
from iostack.filters.records import RecordBlocks, fetch_start, prepend
from iostack.filters.registry import filter_names, get_filter
from iostack.swift_middleware.policies import reader_settings, shared_reader

LOG = logging.getLogger(__name__)
FILTER_HEADER = "X-Iostack-Filter"
PARAM_HEADER_PREFIX = "X-Iostack-Param-"
QUERY_PREFIX = "iostack-"
SELECTED_HEADER = "X-Iostack-Selected"
_HIDDEN = ("Content-Length", "Etag", "Content-Range", "Accept-Ranges", "Last-Modified")


class SelectError(Exception):
    """An answer that cannot be given: ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def record_filters() -> list[str]:
    return [name for name in filter_names() if get_filter(name).selects_records]


def requested_filter(req: Request) -> tuple[FilterSpec, dict[str, str]] | None:
    """The record filter a request asks for, with its parameters as sent (strings)."""
    query = {k[len(QUERY_PREFIX):]: v for k, v in req.params.items() if k.startswith(QUERY_PREFIX)}
    name = req.headers.get(FILTER_HEADER) or query.pop("filter", None)
    if not name:
        return None
    try:
        spec = get_filter(name.strip().lower())
    except UnknownFilterError:
        spec = None
    if spec is None or not spec.selects_records:
        raise SelectError(400, f"{FILTER_HEADER}: {name!r} is not a record filter "
                               f"(one of: {', '.join(record_filters())})")
    params = {k.replace("-", "_").lower(): v for k, v in query.items()}
    for header, value in req.headers.items():
        if header.title().startswith(PARAM_HEADER_PREFIX):
            params[header[len(PARAM_HEADER_PREFIX):].replace("-", "_").lower()] = value
    return spec, params


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


class Selecting:
    """One GET answered by a chain of selections (the policy's, then the request's)."""

    def __init__(self, app: Any, req: Request, selections: list[Selection],
                 names: list[str], max_first_line: int) -> None:
        self.app = app
        self.req = req
        self.selections = selections
        self.names = names
        self.max_first_line = max_first_line
        self.skip_first = any(s.skips_first_record for s in selections)

    def _get(self, byte_range: str | None) -> Response:
        headers = {"Range": byte_range} if byte_range else {}
        sub = make_subrequest(self.req.environ, method="GET", path=self.req.path_info,
                              headers=headers, swift_source="IOSEL")
        for name in ("If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"):
            if name in self.req.headers:
                sub.headers[name] = self.req.headers[name]
        return sub.get_response(self.app)

    def _first_line(self, chunks: Iterator[bytes]) -> tuple[bytes | None, bytes]:
        """The object's first record and what was read after it."""
        held = b""
        for chunk in chunks:
            held += chunk
            newline = held.find(b"\n")
            if newline >= 0:
                return held[: newline + 1], held[newline + 1:]
            if len(held) > self.max_first_line:
                raise SelectError(422, f"the first line of {self.req.path} is longer than "
                                       f"{self.max_first_line} bytes")
        return (held or None), b""

    def _begin(self, first: bytes | None, at_start: bool) -> bytes:
        """Run every selection's ``begin``; return what the answer starts with."""
        prefix = b""
        for selection in self.selections:
            prefix = selection.begin(first, at_start=True)
            first = prefix or first  # the next one sees the previous one's header
        return prefix if at_start else b""

    def answer(self) -> Response:
        start, end = record_range(self.req)
        if start == 0:
            resp = self._get(None)
            if not resp.is_success:
                return resp
            body = iter(resp.app_iter)
            first, after = self._first_line(body)
            records = prepend(after, body) if self.skip_first else prepend(
                (first or b"") + after, body)
            shift = len(first or b"") if self.skip_first else 0
            blocks = RecordBlocks(0, None if end is None else end - shift).blocks(records) \
                if end is None or end >= shift else iter(())
        else:
            first = None
            if self.skip_first:
                head = self._get(f"bytes=0-{self.max_first_line}")
                if head.status_int != 416:  # 416: an empty object, no first line
                    if not head.is_success:
                        return head
                    try:
                        first, _ = self._first_line(iter(head.app_iter))
                    finally:
                        close_if_possible(head.app_iter)
            resp = self._get(f"bytes={fetch_start(start)}-")
            if resp.status_int == 416:  # the range starts past the end: no records
                close_if_possible(resp.app_iter)
                resp = Response(request=self.req, status=200, app_iter=[],
                                content_type="text/plain")
            elif not resp.is_success:
                return resp
            blocks = RecordBlocks(start, end).blocks(resp.app_iter)
        answer = self._answer_chunks(blocks)
        try:
            prefix = self._begin(first, start == 0)  # a ParamError: 400
            head = next(answer, b"")  # errors in the first block still get a status
        except FilterError as exc:
            close_if_possible(resp.app_iter)
            if isinstance(exc, ParamError):
                raise
            raise SelectError(422, f"{', '.join(self.names)} cannot read "
                                   f"{self.req.path}: {exc}") from None
        headers = {k: v for k, v in resp.headers.items() if k.title() not in _HIDDEN}
        headers[SELECTED_HEADER] = ",".join(self.names)
        out = Response(request=self.req, status=200, headers=headers,
                       app_iter=_closing(prepend(prefix + head, answer), resp.app_iter))
        out.content_length = None
        return out

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
        for block in blocks:
            # On a native thread: pyarrow parses without the GIL, so one worker
            # selects for concurrent requests on several cores while its hub
            # keeps moving other requests' bytes.
            block = tpool.execute(self._select, block)
            if block:
                yield block


def _closing(chunks: Iterator[bytes], source: Any) -> Iterator[bytes]:
    try:
        yield from chunks
    finally:
        close_if_possible(source)


class SelectMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.reader_settings = reader_settings(conf)
        self.max_first_line = int(conf.get("max_first_line", 1 << 20))

    def _policy_filters(self, req: Request) -> list[tuple[FilterSpec, dict[str, Any]]]:
        try:
            info = RequestInfo.from_path("GET", req.path, headers=dict(req.headers))
            pipeline = shared_reader(self.reader_settings).resolve(info).pipeline
        except Exception as exc:  # noqa: BLE001 - serve without the policy's selection
            LOG.error("IOStack select: policy lookup for %s failed: %s", req.path, exc)
            return []
        chosen = []
        for entry in pipeline:
            try:
                spec = get_filter(entry.filter)
            except UnknownFilterError:
                continue  # an uploaded (sandboxed) filter: not a record filter
            if spec.selects_records:
                chosen.append((spec, entry.params))
        return chosen

    @wsgify
    def __call__(self, req: Request):
        if req.method != "GET":
            return self.app
        try:
            _version, account, container, obj = split_path(req.path, 4, 4, True)
        except ValueError:
            return self.app
        context = FilterContext(account=account, container=container, obj=obj)
        try:
            requested = requested_filter(req)
            chain = self._policy_filters(req) + ([requested] if requested else [])
            if not chain:
                return self.app
            selections = [spec.selection(params, context) for spec, params in chain]
            return Selecting(self.app, req, selections, [spec.name for spec, _ in chain],
                             self.max_first_line).answer()
        except FilterError as exc:  # a ParamError: the request's or the policy's parameters
            return HTTPBadRequest(request=req, body=f"IOStack: {exc}\n",
                                  content_type="text/plain")
        except SelectError as exc:
            return Response(request=req, status=exc.status, body=f"IOStack: {exc}\n",
                            content_type="text/plain")


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return SelectMiddleware(app, conf)

    return factory
