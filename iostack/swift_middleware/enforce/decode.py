"""The GET/HEAD path: present a filtered object exactly as the tenant stored it.

The backend response carries the stored bytes and the filter record. The
record's filters are opened as views over the stored object, in reverse
order, and the response is rebuilt with the tenant's length and ETag as a
conditional swob response, so swob itself answers ``Range`` (single and
multiple), ``If-Match``, ``If-None-Match`` and ``If-Modified-Since`` from
the decoded view, reading only the stored bytes each range needs. Headers
wait for the first decoded bytes (``FirstBytesFirst``), so a filter that
fails at once gets an error response, not a 200 that breaks off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from swift.common.swob import (
    HTTPInternalServerError,
    HTTPServiceUnavailable,
    Request,
    Response,
    multi_range_iterator,
)
from swift.common.utils import close_if_possible

from iostack.filters.base import ByteSource, FilterContext
from iostack.filters.errors import FilterError, FilterUnavailable, IntegrityError
from iostack.filters.library import get_filter
from iostack.filters.records import prepend
from iostack.stored_object import (
    AppliedFilter,
    Layer,
    is_sandboxed,
    original_size,
    read_pipeline,
)
from iostack.swift_middleware.enforce.sandbox_object import (
    MIN_STORED_BYTES,
    ObjectNodeSandboxedView,
)
from iostack.swift_middleware.enforce.sandboxed import SandboxedView
from iostack.swift_middleware.enforce.source import SwiftObjectSource
from iostack.swift_middleware.streams import closing

# Headers of the stored representation that must not reach the client as they are.
_STORED_ONLY = ("Content-Length", "Content-Range", "Etag", "Accept-Ranges")
_CONDITIONALS = ("If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since")


class ViewAppIter:
    """A WSGI app_iter over a decoded view, with the range hooks swob looks for."""

    def __init__(self, view: ByteSource, source: SwiftObjectSource, request: Request) -> None:
        self.view = view
        self.source = source
        self.request = request

    def __iter__(self) -> Iterator[bytes]:
        return self.app_iter_range(0, self.view.length)

    def app_iter_range(self, start: int, end: int) -> Iterator[bytes]:
        try:
            yield from self.view.read(start, end)
        except FilterError as exc:
            # Headers are gone by now: all we can do is stop short, so the
            # client sees a truncated body against its Content-Length.
            raise _abort(self.request, exc) from exc
        finally:
            self.source.close()

    def app_iter_ranges(self, ranges, content_type, boundary, size) -> Iterator[bytes]:
        def one_range(start: int, end: int) -> Iterator[bytes]:
            return self.view.read(start, end)

        try:
            yield from multi_range_iterator(ranges, content_type, boundary, size, one_range)
        except FilterError as exc:
            raise _abort(self.request, exc) from exc
        finally:
            self.source.close()

    def close(self) -> None:
        self.source.close()


class DecodeFailed(RuntimeError):
    """A decoded body could not be produced; ``__cause__`` is the ``FilterError``."""


def _abort(request: Request, exc: FilterError) -> Exception:
    return DecodeFailed(f"IOStack: reading {request.path} failed: {exc}")


class FirstBytesFirst:
    """WSGI app sending a decoded response's headers once its first bytes are decoded.

    The WSGI server would send them with the first chunk anyway; deciding
    here lets a filter that fails before producing anything (a damaged first
    frame, a sandboxed filter that times out) answer with an error that says
    so (500, or 503 for a filter that did not answer) instead of a 200 that
    breaks off. A failure further into the body can only cut it short.
    """

    def __init__(self, response: Response) -> None:
        self.response = response

    def __call__(self, env: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        held: list[tuple[str, list[tuple[str, str]]]] = []
        body = self.response(env, lambda status, headers, exc_info=None: held.append(
            (status, headers)))
        chunks = iter(body)
        try:
            first = next(chunks, b"")
        except DecodeFailed as exc:
            close_if_possible(body)
            cause = exc.__cause__
            error = HTTPInternalServerError if isinstance(cause, IntegrityError) \
                else HTTPServiceUnavailable
            return error(body=f"{exc}\n", content_type="text/plain")(env, start_response)
        start_response(*held[0])
        return closing(prepend(first, chunks), body)


def is_filtered(resp: Response, layer: Layer) -> bool:
    return layer.pipeline_header in resp.headers


def _preserves_bytes(applied: list[AppliedFilter]) -> bool:
    return all(not is_sandboxed(entry.meta) and get_filter(entry.name).stored_unchanged(entry.meta)
               for entry in applied)


def decoded_response(app, request: Request, resp: Response, context: FilterContext,
                     layer: Layer, conditionals: bool = True,
                     lower_etag_at: str | None = None, sandbox: Any = None,
                     sandbox_on_object: bool = False) -> Response | FirstBytesFirst:
    """Rebuild a backend GET/HEAD response of an object ``layer`` filtered.

    ``conditionals=False`` leaves ``If-*`` headers to whoever already
    evaluated them (the object server, against the tenant's ETag) and lets the
    rebuilt response answer only ``Range``. ``lower_etag_at`` names the sysmeta
    where a layer below keeps the ETag of what it presents (for pinning reads).
    ``sandbox`` (a ``SandboxRunner``) decodes filters that ran in the sandbox;
    with ``sandbox_on_object`` the one that ran last on PUT is decoded by the
    object servers instead, for objects of ``MIN_STORED_BYTES`` or more
    (``iostack.swift_middleware.enforce.sandbox_object``).
    """
    try:
        applied = read_pipeline(resp.headers, layer)
        if layer.size_header not in resp.headers and _preserves_bytes(applied):
            # Recorded up front, without a size or ETag of its own: the stored
            # object's are the tenant's.
            size = int(resp.headers.get("Content-Length", 0))
            etag = resp.headers.get("Etag", "").strip('"')
        else:
            size = original_size(resp.headers, layer)
            etag = resp.headers.get(layer.etag_header, "")
        headers = {k: v for k, v in resp.headers.items()
                   if k.title() not in _STORED_ONLY and not layer.describes_stored_form(k)}
        headers["Etag"] = etag  # unquoted, as Swift sends it
        headers["Accept-Ranges"] = "bytes"
        if request.method == "HEAD" or resp.status_int not in (200, 206):
            # HEAD, 304 and 412 carry no body: only the headers change.
            out = Response(request=request, status=resp.status, headers=headers,
                           app_iter=resp.app_iter)
            out.content_length = size if resp.status_int == 200 else 0
            return out
        if resp.status_int == 206:
            raise FilterError("the object server honoured Range on a filtered object")
        source = SwiftObjectSource(app, request, int(resp.headers["Content-Length"]),
                                   resp.headers["Etag"].strip('"'), resp.app_iter,
                                   etag_is_at=lower_etag_at)
        view: ByteSource = source
        for entry in reversed(applied):
            if not is_sandboxed(entry.meta):
                view = get_filter(entry.name).open_view(view, entry.meta, context)
            elif sandbox is None:
                raise FilterError(f"{entry.name} ran in the sandbox, which this server lacks")
            elif sandbox_on_object and view is source and source.length >= MIN_STORED_BYTES:
                view = ObjectNodeSandboxedView(sandbox, source, entry.meta, context)
            else:
                view = SandboxedView(sandbox, view, entry.meta, context)
        if view.length != size:
            raise FilterError(f"decoded length {view.length} differs from the recorded {size}")
    except FilterUnavailable as exc:  # a newer record, a filter that cannot run now
        return HTTPServiceUnavailable(
            request=request, body=f"IOStack: cannot decode {request.path}: {exc}",
            content_type="text/plain")
    except FilterError as exc:
        return HTTPInternalServerError(
            request=request, body=f"IOStack: cannot decode {request.path}: {exc}",
            content_type="text/plain")
    answer_to = request
    if not conditionals:
        answer_to = Request(dict(request.environ))
        for name in _CONDITIONALS:
            answer_to.headers.pop(name, None)
    out = Response(request=answer_to, headers=headers, conditional_response=True,
                   app_iter=ViewAppIter(view, source, request))
    out.content_length = size
    return FirstBytesFirst(out)
