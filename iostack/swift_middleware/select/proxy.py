"""IOStack record selection: answer a GET with the rows, columns or lines a query needs.

Record filters (``csv_select``, ``json_select``, ``parquet_select``, ``grep``:
``FilterSpec.selects_records``)
run on the object as its tenant stored it, so analytics jobs receive only
what they asked for: the IOStack paper's Spark pushdown. Where they run:

- on the object server that holds the object (stage ``object``, the default
  for record filters): this middleware sends the chain down
  (``iostack.swift_middleware.select.frames``) and relays the selected bytes, so the whole object
  never crosses the network to the proxy
  (``iostack.swift_middleware.select.object``);
- here, on the proxy, when a policy stages them ``ON PROXY``, when
  ``object_stage = false``, or when the object server declines: objects
  encoded by proxy-stage filters (the ``iostack`` middleware below undoes
  them), large-object manifests, symlinks. ``X-Iostack-Selected-On`` says
  which it was.

They are invoked

- per request, like a storlet call: ``X-Iostack-Filter: csv_select`` with one
  ``X-Iostack-Param-<name>: <value>`` header per parameter
  (``X-Iostack-Param-Columns: user_id``), or the query string
  ``?iostack-filter=csv_select&iostack-columns=user_id`` (TempURL users
  cannot set headers); ``X-Iostack-Stage: proxy`` (``iostack-stage``) keeps
  the selection on the proxy (``object``, the default, asks object servers);
- by policy: ``FOR CONTAINER t2/logs DO SET CSV_SELECT WITH columns=user_id``
  makes every GET of those objects a selection. A request's own filter then
  runs on the policy's answer (it can narrow it, never widen it). The
  object as stored is read with ``X-Iostack-Policy-Select: off`` (or
  ``?iostack-policy-select=off``), which skips the policy's selection (not
  a request's own filter); the Spark data source never sends it.

A ``Range: bytes=S-E`` (one range; ``E`` may be omitted) selects the records
that *start* in it, so that byte-range splits of an object never lose or
repeat a record (``iostack.filters.records``); the answer is ``200`` with
the selection, never a ``206``. Answers are streamed: no Content-Length, no
ETag (they are not the object), ``X-Iostack-Selected`` names the filters.
Selection runs in native threads (pyarrow releases the GIL), so a worker
selects for concurrent requests on several cores.
Bad parameters, unknown columns and malformed predicates get ``400`` naming
the problem, before any byte of the object is sent; an object that is not
valid for the filter (a broken quote in its first MiB) gets ``422``; a
failure further on cuts the answer short, and never passes as complete.
A HEAD describes what a GET of the same URL answers: under a selection
(by policy or asked for) it carries ``X-Iostack-Selected`` and the answer's
``Content-Type``, and no ``Content-Length``/``ETag`` (a selection's size is
known only once it has been made).

Place it right after ``iostack_qos`` in the proxy pipeline (after auth,
above ``copy``/``slo``/``dlo``/``iostack``): bandwidth limits then shape
the selected bytes, and large objects are selected whole.

Configuration (``[filter:iostack_select]``)::

    use = egg:iostack#iostack_select
    max_first_line = 1048576   # bytes: a longer first line (CSV header) is refused
    max_record = 8388608       # bytes: a longer record makes the object unreadable (422)
    object_stage = true        # ask object servers to select (false: always here)
    parquet_max_footer = 8388608 ...  # Parquet limits, see iostack.filters.builtin.parquet_select

Parquet objects are read by ranges, not as records
(``iostack.swift_middleware.select.parquet``); answers are CSV, JSON
Lines or Arrow (the ``output`` parameter, ``iostack.filters.output``), with
the matching ``Content-Type``.

plus the policy-reader options
(``iostack.swift_middleware.shared_reader``: ``redis_url``, ``key_prefix``...).
A failed policy lookup is logged and the request is served without the
policy's selection: policies here shape answers, they are not access control.

What it offers (record filters, answer formats, limits) is registered with
``register_swift_info`` under ``iostack_select``, so clients find it in the
proxy's ``GET /info`` (``docs/filters.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

from swift.common.registry import register_swift_info
from swift.common.swob import (
    HTTPBadRequest,
    HTTPServiceUnavailable,
    Request,
    Response,
    wsgify,
)
from swift.common.utils import close_if_possible, config_true_value, get_logger, split_path

from iostack.filters.base import FilterContext, FilterSpec
from iostack.filters.builtin.parquet_select import ParquetLimits
from iostack.filters.errors import FilterError, UnknownFilterError
from iostack.filters.library import filter_names, get_filter
from iostack.filters.output import FORMATS
from iostack.filters.records import MAX_RECORD, prepend
from iostack.policy.logs import route_to_swift
from iostack.policy.reader import PolicyStoreUnavailable
from iostack.policy.resolve import resolve
from iostack.policy.view import RequestView, view_for
from iostack.swift_middleware.select.engine import SelectError, record_range
from iostack.swift_middleware.select.frames import (
    BACKEND_SELECTED_HEADER,
    DECLINED_HEADER,
    FRAMES,
    SELECT_HEADER,
    IncompleteAnswer,
    read_frames,
    select_request,
)
from iostack.swift_middleware.select.parquet import selecting_for
from iostack.swift_middleware.shared_reader import reader_settings, shared_reader
from iostack.swift_middleware.streams import closing
from iostack.swift_middleware.subrequest import object_subrequest

FILTER_HEADER = "X-Iostack-Filter"
PARAM_HEADER_PREFIX = "X-Iostack-Param-"
QUERY_PREFIX = "iostack-"
SELECTED_HEADER = "X-Iostack-Selected"
STAGE_HEADER = "X-Iostack-Selected-On"
STAGE_REQUEST_HEADER = "X-Iostack-Stage"
# "off": this request skips the policy's selection and reads the object as stored.
POLICY_SELECT_HEADER = "X-Iostack-Policy-Select"
SWIFT_INFO_NAME = "iostack_select"  # the key of ``GET /info``
# Bounds on what a request may ask (csv_select's ``where`` has its own, tighter ones).
MAX_PARAMS = 16
MAX_PARAM_BYTES = 8192
_HIDDEN = ("Content-Length", "Etag", "Content-Range", "Accept-Ranges", "Last-Modified")


def record_filters() -> list[str]:
    return [name for name in filter_names() if get_filter(name).selects_records]


def requested_filter(req: Request) -> tuple[FilterSpec, dict[str, str], str] | None:
    """The record filter a request asks for, its parameters as sent (strings), its stage."""
    query = {k[len(QUERY_PREFIX):]: v for k, v in req.params.items() if k.startswith(QUERY_PREFIX)}
    name = req.headers.get(FILTER_HEADER) or query.pop("filter", None)
    query_stage = query.pop("stage", "")  # never a filter parameter, even beside the header
    query.pop("policy-select", None)  # likewise (``policy_skipped``)
    stage = (req.headers.get(STAGE_REQUEST_HEADER) or query_stage).strip().lower()
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
    if len(params) > MAX_PARAMS:
        raise SelectError(400, f"at most {MAX_PARAMS} record-filter parameters, "
                               f"got {len(params)}")
    for key, value in params.items():
        if len(value.encode()) > MAX_PARAM_BYTES:
            raise SelectError(400, f"record-filter parameter {key!r} is longer than "
                                   f"{MAX_PARAM_BYTES} bytes")
    if stage and stage not in spec.metadata.stages:
        raise SelectError(400, f"{STAGE_REQUEST_HEADER}: {stage!r} is not one of "
                               f"{', '.join(sorted(spec.metadata.stages))}")
    return spec, params, stage or spec.metadata.default_stage


def policy_skipped(req: Request) -> bool:
    """Whether the request asks for the object as stored (``X-Iostack-Policy-Select: off``)."""
    value = req.headers.get(POLICY_SELECT_HEADER) or req.params.get(QUERY_PREFIX + "policy-select")
    return (value or "").strip().lower() == "off"


def selected_response(req: Request, source: Response, chunks: Iterator[bytes],
                      names: list[str], stage: str | None, content_type: str) -> Response:
    """The client's 200: ``source``'s headers, less those that describe the object."""
    headers = {k: v for k, v in source.headers.items()
               if k.title() not in _HIDDEN and not k.lower().startswith("x-backend-")}
    headers[SELECTED_HEADER] = ",".join(names)
    if stage:
        headers[STAGE_HEADER] = stage
    headers["Content-Type"] = content_type
    out = Response(request=req, status=200, headers=headers, app_iter=chunks)
    out.content_length = None
    return out


class ProxySelect:
    """One GET's selection chain: on an object server when it can, else here."""

    def __init__(self, app: Any, req: Request, chain: list[tuple[FilterSpec, dict[str, Any], str]],
                 context: FilterContext, max_first_line: int, object_stage: bool,
                 limits: ParquetLimits, max_record: int) -> None:
        self.app = app
        self.req = req
        self.chain = chain
        self.context = context
        self.names = [spec.name for spec, _, _ in chain]
        self.max_first_line = max_first_line
        self.limits = limits
        self.max_record = max_record
        self.object_stage = object_stage and all(stage == "object" for _, _, stage in chain)

    def _get(self, headers: dict[str, str], method: str = "GET") -> Response:
        sub = object_subrequest(self.req, method, "IOSEL", headers)
        for name in ("If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"):
            if name in self.req.headers:
                sub.headers[name] = self.req.headers[name]
        return sub.get_response(self.app)

    def head(self) -> Response:
        """What a GET would answer, without its body (the object's own answer if not 2xx)."""
        content_type = [spec.selection(params, self.context)
                        for spec, params, _ in self.chain][-1].content_type
        resp = self._get({}, "HEAD")
        if not resp.is_success:
            return resp
        return selected_response(self.req, resp, iter(()), self.names, None, content_type)

    def answer(self) -> Response:
        start, end = record_range(self.req)
        # Parameters are checked here, so a bad request never reaches an object server.
        selections = [spec.selection(params, self.context) for spec, params, _ in self.chain]
        selecting = selecting_for(
            lambda byte_range: self._get({"Range": byte_range} if byte_range else {}),
            self.req.path, selections, self.names, self.max_first_line, self.limits,
            max_record=self.max_record)
        content_type = selections[-1].content_type
        if self.object_stage:
            resp = self._on_object(start, end, content_type)
            if resp is not None:
                return resp
        answer = selecting.run(start, end)
        if isinstance(answer, Response):
            return answer
        return selected_response(self.req, answer.source, answer.chunks, self.names, "proxy",
                                 content_type)

    def _on_object(self, start: int, end: int | None, content_type: str) -> Response | None:
        """The object server's answer, or None when the selection is left to this proxy."""
        resp = self._get({SELECT_HEADER: select_request(
            [(spec.name, params) for spec, params, _ in self.chain], start, end)})
        if resp.headers.get(BACKEND_SELECTED_HEADER) == FRAMES:
            chunks = read_frames(resp.app_iter)
            try:
                head = next(chunks, b"")
            except (SelectError, IncompleteAnswer):
                close_if_possible(resp.app_iter)
                raise
            return selected_response(self.req, resp, closing(prepend(head, chunks), resp.app_iter),
                                     self.names, "object", content_type)
        if resp.is_success or DECLINED_HEADER in resp.headers:
            close_if_possible(resp.app_iter)
            return None
        return resp  # the object's own answer: 404, 304, 412 ...


class SelectMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.logger = get_logger(conf, log_route="iostack_select")
        route_to_swift(self.logger)
        self.reader_settings = reader_settings(conf)
        self.max_first_line = int(conf.get("max_first_line", 1 << 20))
        self.max_record = int(conf.get("max_record", MAX_RECORD))
        self.object_stage = config_true_value(conf.get("object_stage", "true"))
        self.limits = ParquetLimits.from_conf(conf)

    def swift_info(self) -> dict[str, Any]:
        """What this proxy offers, for clients reading ``GET /info``."""
        return {
            "filters": record_filters(),
            "output_formats": list(FORMATS),
            "filter_header": FILTER_HEADER,
            "param_header_prefix": PARAM_HEADER_PREFIX,
            "query_prefix": QUERY_PREFIX,
            "max_params": MAX_PARAMS,
            "max_param_bytes": MAX_PARAM_BYTES,
            "max_first_line": self.max_first_line,
            "max_record": self.max_record,
            "object_stage": self.object_stage,
            "parquet_limits": asdict(self.limits),
        }

    def _policy_filters(self, view: RequestView) -> list[tuple[FilterSpec, dict[str, Any], str]]:
        reader = shared_reader(self.reader_settings)
        try:
            pipeline = view.resolution(reader).pipeline
            if view.method == "HEAD":
                # A HEAD describes the GET, and record filters act on GET only.
                pipeline = resolve(replace(view.info, method="GET"), *view.lookup(reader)).pipeline
        except PolicyStoreUnavailable as exc:
            # Selection fails open: the tenant gets the whole object (docs/datapath.md).
            self.logger.error("IOStack select: policy lookup for %s failed: %s",
                              view.path_info, exc)
            return []
        chosen = []
        for entry in pipeline:
            try:
                spec = get_filter(entry.filter)
            except UnknownFilterError:
                continue  # an uploaded (sandboxed) filter: not a record filter
            if spec.selects_records:
                chosen.append((spec, entry.params, entry.stage))
        return chosen

    @wsgify
    def __call__(self, req: Request):
        if req.method not in ("GET", "HEAD"):
            return self.app
        try:
            _version, account, container, obj = split_path(req.path, 4, 4, True)
        except ValueError:
            return self.app
        view = view_for(req.environ, self.app)
        # Nothing is parsed or resolved for a request Swift will refuse.
        if view is None or view.internal or not view.authorized():
            return self.app
        context = FilterContext(account=account, container=container, obj=obj)
        try:
            requested = requested_filter(req)
            policy = [] if policy_skipped(req) else self._policy_filters(view)
            chain = policy + ([requested] if requested else [])
            if not chain:
                return self.app
            select = ProxySelect(self.app, req, chain, context, self.max_first_line,
                                 self.object_stage, self.limits, self.max_record)
            return select.head() if req.method == "HEAD" else select.answer()
        except FilterError as exc:  # a ParamError: the request's or the policy's parameters
            return HTTPBadRequest(request=req, body=f"IOStack: {exc}\n",
                                  content_type="text/plain")
        except SelectError as exc:
            return Response(request=req, status=exc.status, body=f"IOStack: {exc}\n",
                            content_type="text/plain")
        except IncompleteAnswer as exc:
            self.logger.warning("IOStack select: %s: %s", req.path, exc)
            return HTTPServiceUnavailable(request=req, body=f"IOStack: {exc}\n",
                                          content_type="text/plain")


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        middleware = SelectMiddleware(app, conf)
        register_swift_info(SWIFT_INFO_NAME, **middleware.swift_info())
        return middleware

    return factory
