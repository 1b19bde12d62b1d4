"""IOStack record selection on object servers: filter where the data is.

A proxy's ``iostack_select`` asks the object server it reads from to run
the selection (``X-Backend-Iostack-Select``, see ``iostack.swift_middleware.select.frames``), so
only the selected bytes cross the network and the proxy, as in the IOStack
paper's storage-side Spark pushdown. Here the chain of record filters runs
on the object as its tenant stored it (this middleware sits above the
object-stage ``iostack`` middleware, which has undone object-stage filters),
with the same engine and byte-range semantics as on proxies
(``iostack.swift_middleware.select.engine``), and the answer goes back framed.

It declines (an empty answer with ``X-Backend-Iostack-Select-Declined``)
what it cannot select correctly, and the proxy selects instead:

- objects encoded by proxy-stage filters (compressed or encrypted on the
  proxy: only the proxy can decode them);
- large-object manifests (SLO, DLO) and symlinks: their data is elsewhere;
- erasure-coded fragments.

A selection cannot resume at a byte offset, so a GET that carries both a
selection and a ``Range`` (a proxy retrying another replica after a broken
read) gets 503, and the proxy cuts its client's answer short rather than
splice two answers.

Place it after ``iostack_metrics`` and before ``storlet_handler`` and
``iostack`` in the object-server pipeline. Configuration
(``[filter:iostack_select]`` in object-server.conf)::

    use = egg:iostack#iostack_select_object
    max_first_line = 1048576   # bytes: a longer first line (CSV header) is refused
    max_record = 8388608       # bytes: a longer record makes the object unreadable (422)
    keepalive = 2              # seconds without selected bytes before a padding frame
    parquet_max_footer = 8388608 ...  # Parquet limits, see iostack.filters.builtin.parquet_select
    padding = 65536            # bytes per padding frame: at least the proxies'
                               # object_chunk_size, which each of their reads waits for
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from swift.common.swob import (
    HTTPBadRequest,
    HTTPServiceUnavailable,
    Request,
    Response,
    wsgify,
)
from swift.common.utils import get_logger, split_path

from iostack.filters.base import FilterContext, Selection
from iostack.filters.builtin.parquet_select import ParquetLimits
from iostack.filters.errors import FilterError, UnknownFilterError
from iostack.filters.library import get_filter
from iostack.filters.records import MAX_RECORD
from iostack.policy.logs import route_to_swift
from iostack.stored_object import TENANT_LAYER
from iostack.swift_middleware.select.engine import Answer, SelectError, Selecting
from iostack.swift_middleware.select.frames import (
    BACKEND_SELECTED_HEADER,
    DATA,
    DECLINED_HEADER,
    END,
    FRAMES,
    PADDING,
    SELECT_HEADER,
    error_frame,
    frame,
    parse_select_request,
)
from iostack.swift_middleware.select.parquet import ParquetSelecting, selecting_for
from iostack.swift_middleware.subrequest import object_subrequest

# Headers that mean "this object's bytes are not the tenant's records".
_NOT_SELECTABLE = (
    (TENANT_LAYER.pipeline_header, "its bytes are encoded by proxy-stage filters"),
    ("X-Static-Large-Object", "it is a static large object manifest"),
    ("X-Object-Manifest", "it is a dynamic large object manifest"),
    ("X-Object-Sysmeta-Symlink-Target", "it is a symlink"),
    ("X-Object-Sysmeta-Ec-Frag-Index", "it is an erasure-coded fragment"),
)
# Headers of the object that do not describe a selection of it.
_OBJECT_ONLY = ("Content-Length", "Etag", "Content-Range", "Accept-Ranges")


class ObjectSelect:
    """One selection GET on this object server."""

    def __init__(self, app: Any, req: Request, selecting_args: dict[str, Any]) -> None:
        self.app = app
        self.req = req
        self.selecting_args = selecting_args
        # The proxy's backend headers (storage policy, ETag-is-at, conditionals...)
        # go with every local request.
        self.headers = {k: v for k, v in req.headers.items()
                        if k.lower() not in ("range", "content-length")}

    def local(self, method: str, byte_range: str | None = None) -> Response:
        headers = dict(self.headers, **({"Range": byte_range} if byte_range else {}))
        sub = object_subrequest(self.req, method, "IOSEL", headers)
        return sub.get_response(self.app)

    def answer(self, selections: list[Selection], names: list[str], start: int,
               end: int | None, padding: bytes) -> Response:
        head = self.local("HEAD")
        if not head.is_success:
            return self.app  # 404, 304, 412 ...: the object server's own answer
        for header, reason in _NOT_SELECTABLE:
            if header in head.headers:
                return Response(request=self.req, status=200, body=b"",
                                headers={DECLINED_HEADER: reason})
        try:
            selecting = selecting_for(lambda byte_range: self.local("GET", byte_range),
                                      self.req.path, selections, names, **self.selecting_args)
        except SelectError as exc:
            return HTTPBadRequest(request=self.req, body=f"IOStack: {exc}".encode())
        headers = {k: v for k, v in head.headers.items() if k.title() not in _OBJECT_ONLY}
        headers[BACKEND_SELECTED_HEADER] = FRAMES
        resp = Response(request=self.req, status=200, headers=headers,
                        app_iter=_framed(selecting, start, end, padding))
        resp.content_length = None
        return resp


def _framed(selecting: Selecting | ParquetSelecting, start: int, end: int | None,
            padding: bytes) -> Iterator[bytes]:
    yield padding  # the response headers leave now, not with the first selected bytes
    try:
        answer = selecting.run(start, end)
    except SelectError as exc:
        yield error_frame(exc.status, str(exc))
        return
    except FilterError as exc:  # a ParamError: the object's header lacks a column
        yield error_frame(400, str(exc))
        return
    if not isinstance(answer, Answer):  # the object went away since the HEAD
        yield error_frame(answer.status_int, f"the object answered {answer.status}")
        return
    try:
        for chunk in answer.chunks:
            yield frame(DATA, chunk) if chunk else padding
    except FilterError as exc:
        yield error_frame(422, f"{', '.join(selecting.names)} cannot read "
                               f"{selecting.path}: {exc}")
        return
    finally:
        answer.chunks.close()
    yield frame(END)


class ObjectSelectMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.logger = get_logger(conf, log_route="iostack_select_object")
        route_to_swift(self.logger)
        self.selecting_args = {"max_first_line": int(conf.get("max_first_line", 1 << 20)),
                               "max_record": int(conf.get("max_record", MAX_RECORD)),
                               "keepalive": float(conf.get("keepalive", 2)),
                               "limits": ParquetLimits.from_conf(conf)}
        size = int(conf.get("padding", 65536))
        self.padding = frame(PADDING, b"\0" * max(size - 9, 0))

    @wsgify
    def __call__(self, req: Request):
        request = req.headers.get(SELECT_HEADER)
        if req.method != "GET" or request is None:
            return self.app
        del req.headers[SELECT_HEADER]
        if "Range" in req.headers:
            return HTTPServiceUnavailable(
                request=req, body=b"IOStack: a record selection cannot resume at a byte offset")
        try:
            _dev, _part, account, container, obj = split_path(req.path, 5, 5, True)
            filters, start, end = parse_select_request(request)
            context = FilterContext(account=account, container=container, obj=obj)
            specs = [get_filter(name) for name, _ in filters]
            if not all(spec.selects_records for spec in specs):
                raise ValueError("not a record filter")
            selections = [spec.selection(params, context)
                          for spec, (_, params) in zip(specs, filters, strict=True)]
        except (ValueError, FilterError, UnknownFilterError) as exc:
            # The proxy checked the request: a refusal here means the two disagree.
            self.logger.warning("IOStack select: refusing %s: %s", req.path, exc)
            return HTTPBadRequest(request=req, body=f"IOStack: {exc}".encode())
        return ObjectSelect(self.app, req, self.selecting_args).answer(
            selections, [spec.name for spec in specs], start, end, self.padding)


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return ObjectSelectMiddleware(app, conf)

    return factory
