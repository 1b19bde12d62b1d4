"""Swift-style test doubles for the IOStack middlewares: a fake Swift below, a fake reader beside.

As Swift tests its middlewares (``test/unit/common/middleware/helpers.py``),
a middleware under test wraps ``FakeSwift``, a WSGI app that records every
request reaching it and answers like the rest of the pipeline would:

- responses registered with ``register(method, path, status, headers, body)``
  win (a container's ACL, a canned framed answer ...);
- an object PUT is stored, body and metadata, after the body is read to its
  end and the footers callback (``swift.callback.update_footers``) has run,
  as the proxy server sends footers to the object servers; a PUT in the
  object server's MIME form (``X-Backend-Obj-Multipart-Mime-Boundary``) is
  parsed with Swift's own MIME reader and its metadata footer checked
  against its ``Content-MD5`` (400 if it differs), as the object server
  does. A PUT whose ETag does not match what arrived is refused with 422 and
  nothing is stored; POST replaces an object's user metadata, DELETE removes it;
- GET and HEAD answer stored objects as object servers do: ``Range`` and
  ``If-*`` (with ``X-Backend-Etag-Is-At`` and
  ``X-Backend-Ignore-Range-If-Metadata-Present``); requests for accounts and
  containers answer 2xx, anything else 404;
- ``swift.authorize`` is asked first, as the proxy server asks it.

Paths are ``/v1/<account>/<container>/<object>`` for a proxy pipeline, or
``/<device>/<partition>/<account>/<container>/<object>`` for an object
server's.

``FakeReader`` stands for the policy reader (``iostack.policy.reader``): it
answers ``lookup`` with the levels a test chose (or raises what it was told
to), and ``use_reader`` makes it the one ``shared_reader`` hands the
middlewares.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swift.common.request_helpers import (
    resolve_etag_is_at_header,
    resolve_ignore_range_header,
)
from swift.common.swob import HTTPUnauthorized, Request, Response
from swift.common.utils import split_path
from swift.obj.server import iter_mime_headers_and_bodies

from iostack.filters.library import builtin_metadata
from iostack.policy.resolve import Level, RequestInfo
from iostack.swift_middleware import shared_reader

MIME_BOUNDARY = "X-Backend-Obj-Multipart-Mime-Boundary"
# What an object server keeps of a PUT's headers.
_KEPT_PREFIXES = ("X-Object-Meta-", "X-Object-Sysmeta-")
_KEPT = ("Content-Type", "X-Static-Large-Object", "X-Object-Manifest", "X-Delete-At")


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


@dataclass
class Call:
    """One request that reached ``FakeSwift``, as it arrived."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes | None = None  # what a PUT or POST sent (None: not read)
    footers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stored:
    headers: dict[str, str]
    body: bytes


class FakeSwift:
    """Everything below the middleware under test; see the module docstring."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.objects: dict[str, Stored] = {}
        self._responses: dict[tuple[str, str], tuple[int, dict[str, str], Any]] = {}

    def register(self, method: str, path: str, status: int,
                 headers: dict[str, str] | None = None, body: Any = b"") -> None:
        """Answer ``method path`` with this (``body`` bytes, or a list of chunks)."""
        self._responses[(method, path)] = (status, dict(headers or {}), body)

    def calls_to(self, method: str, path: str) -> list[Call]:
        return [c for c in self.calls if (c.method, c.path) == (method, path)]

    def __call__(self, env: dict[str, Any], start_response: Callable) -> Any:
        req = Request(env)
        call = Call(req.method, req.path_info, env.get("QUERY_STRING", ""), dict(req.headers))
        self.calls.append(call)
        authorize = env.get("swift.authorize")
        denied = authorize(req) if authorize else None
        if denied is not None:
            return denied(env, start_response)
        registered = self._responses.get((req.method, req.path_info))
        if registered is None and req.method == "HEAD":
            registered = self._responses.get(("GET", req.path_info))
        if registered is not None:
            status, headers, body = registered
            return self._answer(req, Response(status=status, headers=headers),
                                body)(env, start_response)
        if not self._is_object(req.path_info):  # an account or a container
            return Response(status=201 if req.method == "PUT" else 204)(env, start_response)
        if req.method == "PUT":
            return self._put(req, call)(env, start_response)
        stored = self.objects.get(req.path_info)
        if req.method == "POST" and stored is not None:
            self._read_body(req, call)
            stored.headers = {k: v for k, v in stored.headers.items()
                              if not k.title().startswith("X-Object-Meta-")}
            stored.headers.update(self._kept(req.headers))
            return Response(status=202)(env, start_response)
        if req.method == "DELETE" and stored is not None:
            del self.objects[req.path_info]
            return Response(status=204)(env, start_response)
        if req.method in ("GET", "HEAD") and stored is not None:
            resp = Response(status=200, headers=stored.headers)
            return self._answer(req, resp, stored.body)(env, start_response)
        return Response(status=404)(env, start_response)

    @staticmethod
    def _is_object(path: str) -> bool:
        parts = split_path(path, 1, 5, True)
        return parts[0] != "v1" or parts[3] is not None

    @staticmethod
    def _answer(req: Request, resp: Response, body: Any) -> Response:
        """``resp`` as an object server sends it: Range and If-* answered from ``body``."""
        headers = resp.headers
        # On a copy: the environ is shared with the middlewares above.
        answer_to = Request(dict(req.environ))
        resolve_ignore_range_header(answer_to, headers)
        out = Response(request=answer_to, status=resp.status, headers=headers,
                       conditional_response=req.method in ("GET", "HEAD") and resp.is_success,
                       conditional_etag=resolve_etag_is_at_header(answer_to, headers))
        if isinstance(body, bytes):
            out.body = body
        else:
            out.app_iter = body
            out.content_length = None
        return out

    @staticmethod
    def _kept(headers) -> dict[str, str]:
        return {k.title(): v for k, v in headers.items()
                if k.title().startswith(_KEPT_PREFIXES) or k.title() in _KEPT}

    @staticmethod
    def _read_body(req: Request, call: Call) -> bytes:
        source = req.environ["wsgi.input"]
        call.body = b"".join(iter(lambda: source.read(65536), b""))
        return call.body

    def _put(self, req: Request, call: Call) -> Response:
        boundary = req.headers.get(MIME_BOUNDARY)
        if boundary:
            body, footers = self._mime_documents(req, boundary)
            call.body = body
            if footers is None:
                return Response(status=400, body=b"Bad footer checksum")
        else:
            body = self._read_body(req, call)
            footers = {}
            callback = req.environ.get("swift.callback.update_footers")
            if callback:
                callback(footers)  # may raise, as it does in the proxy server
        call.footers = footers
        etag = md5(body)
        expected = footers.get("Etag") or req.headers.get("Etag")
        if expected is not None and expected.strip('"') != etag:
            return Response(status=422, body=b"Etag mismatch")
        headers = self._kept(req.headers)
        headers.update({k: v for k, v in footers.items() if k != "Etag"})
        headers.update({"Etag": etag, "Content-Length": str(len(body)),
                        "X-Timestamp": f"{time.time():.5f}"})
        self.objects[req.path_info] = Stored(headers, body)
        return Response(status=201, headers={"Etag": etag})

    @staticmethod
    def _mime_documents(req: Request, boundary: str) -> tuple[bytes, dict[str, str] | None]:
        """The body and the metadata footer of a MIME PUT; None for a footer that fails its MD5."""
        documents = iter_mime_headers_and_bodies(req.environ["wsgi.input"], boundary.encode(),
                                                 65536)
        _headers, body_file = next(documents)
        body = body_file.read()
        footers: dict[str, str] = {}
        for headers, part in documents:
            data = part.read()
            if headers.get("X-Document") == "object metadata":
                if headers.get("Content-Md5") != md5(data):
                    return body, None
                footers = json.loads(data)
        return body, footers


# -- the policy reader ---------------------------------------------------------------

FILTERS = {m.name: m for m in builtin_metadata()}


def rule(filter_name: str, target: str = "AUTH_t1/c", level: str = "container",
         verb: str = "set", stage: str | None = None, **params: Any) -> Level:
    """One level holding one compiled rule (the stored JSON form, docs/redis-keys.md)."""
    compiled = {"id": f"P-{filter_name}.1", "policy": f"P-{filter_name}", "seq": 1,
                "verb": verb, "filter": filter_name, "params": params}
    if stage:
        compiled["stage"] = stage
    return Level(level, target, (compiled,))


class FakeReader:
    """``PolicyReader.lookup`` over chosen levels; ``error`` is raised instead when set."""

    def __init__(self, *levels: Level) -> None:
        self.levels = list(levels)
        self.error: Exception | None = None
        self.requests: list[RequestInfo] = []

    def lookup(self, request: RequestInfo):
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return self.levels, FILTERS, {}


def use_reader(monkeypatch, reader: FakeReader, conf: dict[str, Any] | None = None) -> None:
    """Make ``reader`` the worker's shared reader for middlewares configured with ``conf``."""
    settings = shared_reader.reader_settings(conf or {})
    key = (os.getpid(), settings["redis_url"], settings["prefix"])
    monkeypatch.setitem(shared_reader._readers, key, reader)


# -- requests ------------------------------------------------------------------------

def deny(req: Request) -> Response | None:
    """``swift.authorize`` of an auth middleware that lets nobody in."""
    return HTTPUnauthorized(request=req)


def request(app: Any, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None, **environ: Any) -> Response:
    """``method path`` through ``app``; the response's body read to its end."""
    env = {"REQUEST_METHOD": method, **environ}
    req = Request.blank(path, environ=env, headers=headers or {},
                        body=body if body is not None else None)
    resp = req.get_response(app)
    resp.body  # noqa: B018 - reads (and closes) the app_iter now
    return resp
