"""IOStack object-server middleware: run the filters a policy stages ``ON OBJECT``.

The proxy middleware resolves the policies once and, for filters staged on
the object servers, sends them down in ``X-Backend-Iostack-Object-Filters``.
Here, on PUT, the body the object server receives is encoded on its way to
disk, and the object layer's record (``record.OBJECT_LAYER``) is added to the
PUT's metadata footer, so body and record are committed together. A plain PUT
is turned into the object server's MIME form (body document, then footer
document) for that; a MIME PUT from the proxy keeps its footers, extended.
On GET and HEAD the object layer is undone before the response leaves the
object server, so the proxy sees exactly what it sent; a GET or HEAD with
``X-Backend-Iostack-Raw: true`` gets the stored bytes and records as they are.

The proxy has validated the parameters it sends; this middleware reads the
header strictly and validates each filter's parameters once more, once
(``object_filters`` says why). A header it cannot read or run (malformed, a
filter or value its library does not know, a key file missing) is a 500
naming what was wrong, before anything is read or stored: the client sent
nothing wrong, the proxy and this node disagree, and that is the operator's
to fix. The object layer's
record holds the parameters without their secrets (``public_params``), as
the proxy layer's does.

Configuration (``[filter:iostack]`` in object-server.conf)::

    use = egg:iostack#iostack_object
    key_file = ...   # only for filters that need keys ON OBJECT; the built-in
                     # encryption runs on proxies only, so none is needed
    filter_threads = true   # compress off the event loop (iostack.filters.offload)
    filter_thread_min_us = 200  # ... when a batch costs more than a hand-off
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from swift.common.request_helpers import (
    get_container_update_override_key,
    update_ignore_range_header,
)
from swift.common.swob import (
    HTTPBadRequest,
    HTTPException,
    HTTPInternalServerError,
    HTTPUnprocessableEntity,
    Request,
    normalize_etag,
    wsgify,
)
from swift.common.utils import get_logger, list_from_csv, split_path
from swift.obj.server import iter_mime_headers_and_bodies

from iostack.filters.base import FilterContext, KeyProvider
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.filters.metadata import public_params
from iostack.filters.offload import offload_from_conf
from iostack.filters.tenant_keys import KeyFileProvider
from iostack.policy.logs import route_to_swift
from iostack.stored_object import (
    ETAG_HEADER,
    OBJECT_FILTERS_HEADER,
    OBJECT_LAYER,
    RAW_HEADER,
    SIZE_HEADER,
    AppliedFilter,
    record_headers,
)
from iostack.swift_middleware.enforce.decode import decoded_response, is_filtered
from iostack.swift_middleware.enforce.encode import READ_CHUNK, EncodingInput

MIME_BOUNDARY = "X-Backend-Obj-Multipart-Mime-Boundary"
IGNORE_RANGE = "X-Backend-Ignore-Range-If-Metadata-Present"
METADATA_FOOTER = "X-Backend-Obj-Metadata-Footer"


class MimeBody:
    """File-like ``wsgi.input``: the encoded body and the footer, as one MIME document."""

    def __init__(self, chunks: Iterator[bytes], client_input, proxy_sent_mime: bool) -> None:
        self._chunks = chunks
        self._pending = b""
        self._client_input = client_input
        self.proxy_sent_mime = proxy_sent_mime

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self._pending += chunk
        cut = len(self._pending) if size < 0 else size
        data, self._pending = self._pending[:cut], self._pending[cut:]
        return data

    def readline(self, size: int = -1) -> bytes:
        # The object server's MIME reader looks for document headers line by line.
        while b"\n" not in self._pending:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self._pending += chunk
        end = self._pending.find(b"\n") + 1 or len(self._pending)
        if 0 <= size < end:
            end = size
        data, self._pending = self._pending[:end], self._pending[end:]
        return data

    def set_hundred_continue_response_headers(self, headers) -> None:
        # Only a proxy that asked for the MIME form expects to hear about it.
        setter = getattr(self._client_input, "set_hundred_continue_response_headers", None)
        if setter and self.proxy_sent_mime:
            setter(headers)

    def send_hundred_continue_response(self) -> None:
        self._client_input.send_hundred_continue_response()


class ObjectStagePut:
    """One PUT whose body the object layer encodes."""

    def __init__(self, req: Request, encoders: list[tuple[AppliedFilter, Any]]) -> None:
        self.req = req
        self.encoders = encoders
        self.client_input = req.environ["wsgi.input"]
        self.proxy_boundary = req.headers.get(MIME_BOUNDARY)
        self.proxy_footer = bool(self.proxy_boundary) and req.headers.get(
            METADATA_FOOTER, "").lower() in ("yes", "true", "1")
        self.client_etag = req.headers.pop("Etag", None)
        self.body: EncodingInput | None = None

    def install(self) -> None:
        req = self.req
        if self.proxy_boundary:
            if not self.proxy_footer:
                raise HTTPBadRequest(request=req, body="IOStack object stage needs footers")
            boundary = self.proxy_boundary.encode()
        else:
            boundary = uuid.uuid4().hex.encode()
            req.headers[MIME_BOUNDARY] = boundary.decode()
            req.headers[METADATA_FOOTER] = "yes"
        self.expected_length = None if self.proxy_boundary else req.content_length
        req.environ["wsgi.input"] = MimeBody(self._documents(boundary), self.client_input,
                                             proxy_sent_mime=bool(self.proxy_boundary))
        # The stored length is known only at the end.
        req.headers.pop("Content-Length", None)
        req.headers.pop("X-Backend-Obj-Content-Length", None)
        req.headers["Transfer-Encoding"] = "chunked"

    def _documents(self, boundary: bytes) -> Iterator[bytes]:
        # Runs only when the object server reads the body, after it has sent
        # its 100-continue (reading the client input earlier would send one
        # without the footer acknowledgement the proxy waits for).
        if self.proxy_boundary:
            rest = iter_mime_headers_and_bodies(self.client_input, boundary, READ_CHUNK)
            _headers, body_file = next(rest)
        else:
            rest, body_file = iter(()), self.client_input
        body = self.body = EncodingInput(self.req, self.encoders, client_input=body_file,
                                         expected_length=self.expected_length)
        yield b"--" + boundary + b"\r\nX-Document: object body\r\n\r\n"
        yield from iter(lambda: body.read(READ_CHUNK), b"")
        footers = self._footers(body, rest)
        doc = json.dumps(footers).encode()
        yield (b"\r\n--" + boundary + b"\r\nX-Document: object metadata\r\nContent-MD5: "
               + hashlib.md5(doc, usedforsecurity=False).hexdigest().encode()
               + b"\r\n\r\n" + doc)
        for headers, part in rest:  # e.g. a multiphase commit document
            head = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
            yield b"\r\n--" + boundary + b"\r\n" + head + b"\r\n"
            yield from iter(lambda part=part: part.read(READ_CHUNK), b"")
        yield b"\r\n--" + boundary + b"--"

    def _footers(self, body: EncodingInput, rest) -> dict[str, str]:
        footers: dict[str, str] = {}
        if self.proxy_footer:
            _headers, footer_file = next(rest)
            footers = json.loads(b"".join(iter(lambda: footer_file.read(READ_CHUNK), b"")))
        received_etag = body.md5.hexdigest()
        expected = footers.pop("Etag", None) or self.client_etag
        if expected is not None and normalize_etag(expected) != received_etag:
            raise HTTPUnprocessableEntity(request=self.req,
                                          body="Etag does not match the MD5 of the body sent")
        footers.update(record_headers(OBJECT_LAYER, body.record()))
        footers[OBJECT_LAYER.etag_header] = received_etag
        footers[OBJECT_LAYER.size_header] = str(body.received)
        if ETAG_HEADER not in footers and ETAG_HEADER not in self.req.headers:
            # No proxy layer: what arrived here is the tenant's body.
            footers[ETAG_HEADER] = received_etag
            footers[SIZE_HEADER] = str(body.received)
        for key, value in (("etag", received_etag), ("size", str(body.received))):
            footers.setdefault(get_container_update_override_key(key), value)
        return footers


class IOStackObjectMiddleware:
    def __init__(self, app, conf: dict[str, Any]) -> None:
        self.app = app
        self.logger = get_logger(conf, log_route="iostack_object")
        route_to_swift(self.logger)
        self.keys: KeyProvider | None = (
            KeyFileProvider(conf["key_file"]) if conf.get("key_file") else None)
        self.offload = offload_from_conf(conf)

    @wsgify
    def __call__(self, req: Request):
        try:
            _dev, _part, account, container, obj = split_path(req.path, 5, 5, True)
        except ValueError:
            return self.app
        context = FilterContext(account=account, container=container, obj=obj, keys=self.keys,
                                offload=self.offload)
        if req.method in ("GET", "HEAD"):
            if req.headers.get(RAW_HEADER, "").lower() in ("true", "yes", "1"):
                return self.app  # the bytes as stored (tools on the storage network)
            return self.handle_read(req, context)
        if req.method == "PUT" and OBJECT_FILTERS_HEADER in req.headers:
            return self.handle_put(req, context)
        return self.app

    def handle_read(self, req: Request, context: FilterContext):
        # The object layer decodes whole stored objects and answers Range from
        # the decoded view; the object server drops Range from the (shared)
        # environ when it honours the ignore list, so keep the client's.
        client_range = req.headers.get("Range")
        proxy_wants_whole = list_from_csv(req.headers.get(IGNORE_RANGE, ""))
        update_ignore_range_header(req, OBJECT_LAYER.pipeline_header)
        resp = req.get_response(self.app)
        if (not is_filtered(resp, OBJECT_LAYER)
                or resp.status_int >= 300 and resp.status_int not in (304, 412)):
            return resp
        req.headers.pop("Range", None)
        if client_range and not any(name in resp.headers for name in proxy_wants_whole):
            req.headers["Range"] = client_range
        # The object server already evaluated If-* against the tenant's ETag.
        return decoded_response(self.app, req, resp, context, OBJECT_LAYER, conditionals=False)

    def handle_put(self, req: Request, context: FilterContext):
        try:
            filters = []
            for name, params in object_filters(req.headers.pop(OBJECT_FILTERS_HEADER)):
                spec = get_filter(name)
                filters.append((spec, spec.validate(params)))  # once: see ``object_filters``
            encoders = [(AppliedFilter(spec.name, public_params(spec.metadata, params), {}),
                         spec.encoder(params, context, validated=True))
                        for spec, params in filters]
        except (ValueError, FilterError) as exc:  # ParamError is a ValueError
            # The proxy sent what this node cannot run: refused before a byte is read.
            return self._refuse(req, HTTPInternalServerError, exc)
        try:
            stage = ObjectStagePut(req, encoders)
            stage.install()
        except HTTPException as error:
            return error
        except ValueError as exc:  # a malformed Content-Length
            return self._refuse(req, HTTPBadRequest, exc)
        resp = req.get_response(self.app)
        if resp.is_success and stage.body and stage.body.done:
            # The proxy expects the ETag of what it sent, not of what is on disk.
            resp.etag = stage.body.md5.hexdigest()
        return resp

    def _refuse(self, req: Request, status, exc: Exception):
        self.logger.error("IOStack object stage: refusing PUT %s: %s", req.path, exc)
        return status(request=req, body=f"IOStack object stage: {exc}",
                      content_type="text/plain")


def object_filters(header: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, params)`` pairs of ``X-Backend-Iostack-Object-Filters``.

    Only the proxy middleware sends the header (proxies strip ``X-Backend-*``
    from clients), after resolving the policies and validating each filter's
    parameters. What this node still checks, and why:

    - the header's shape (a JSON list of ``{"name": str, "params": object}``):
      a header this node cannot read is a 500 naming the problem, never an
      exception;
    - each filter's parameters, once, with ``FilterSpec.validate``: it costs
      microseconds per PUT, fills the defaults this node's filter code relies
      on, and during a rolling upgrade this node's filter library may not be
      the proxy's (a parameter it does not know, a range it does not take).
    """
    try:
        entries = json.loads(header)
    except ValueError:
        raise ValueError("the filter header is not JSON") from None
    if not isinstance(entries, list):
        raise ValueError("the filter header is not a list")
    pairs = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        params = entry.get("params", {}) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(params, dict):
            raise ValueError(f"bad filter entry {entry!r}: expected "
                             '{"name": string, "params": object}')
        pairs.append((name, params))
    return pairs


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return IOStackObjectMiddleware(app, conf)

    return factory
