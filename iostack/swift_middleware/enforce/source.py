"""The stored bytes of one object as a ``ByteSource``, read through the proxy's app.

A filtered GET starts from the backend response the proxy already has (the
whole stored object, because the middleware asked the object server to ignore
``Range`` for filtered objects). Reads that continue where that body stands
consume it; any other read (an index trailer, a frame in the middle of the
object) is a ranged sub-request to the app below the middleware, pinned with
``If-Match`` on the stored ETag so a concurrent overwrite is detected rather
than mixing two versions, and addressed as the request was (``subrequest``:
an old version's reserved name, the storage policy).
"""

from __future__ import annotations

from collections.abc import Iterator

from swift.common.swob import Request, Response
from swift.common.utils import close_if_possible

from iostack.filters.base import RangedSource
from iostack.filters.errors import IntegrityError
from iostack.filters.records import prepend
from iostack.swift_middleware.subrequest import object_subrequest

SWIFT_SOURCE = "IOS"  # marks our sub-requests in the proxy log


class ObjectChanged(IntegrityError):
    """The object was overwritten while it was being read."""


class SwiftObjectSource(RangedSource):
    """Random access to one stored object version."""

    def __init__(self, app, request: Request, length: int, stored_etag: str,
                 body: Iterator[bytes] | None = None, etag_is_at: str | None = None) -> None:
        """``etag_is_at``: where a lower layer keeps the ETag of what it presents."""
        self.app = app
        self.request = request
        self.pin = {"If-Match": stored_etag}
        if etag_is_at:
            self.pin["X-Backend-Etag-Is-At"] = etag_is_at
        self._length = length
        self.stored_etag = stored_etag
        self._body = iter(body) if body is not None else None
        self._body_obj = body
        self._body_pos = 0

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        if self._body is not None and start == self._body_pos:
            return self._read_body(end)
        return self._read_ranged(start, end)

    def _read_body(self, end: int) -> Iterator[bytes]:
        while self._body_pos < end:
            chunk = next(self._body, b"")
            if not chunk:
                raise IntegrityError(
                    f"stored object ended at byte {self._body_pos}, expected {self._length}")
            take = min(len(chunk), end - self._body_pos)
            if take < len(chunk):
                # Keep the rest for the next sequential read.
                self._body = prepend(chunk[take:], self._body)
                chunk = chunk[:take]
            self._body_pos += take
            yield chunk

    def pinned_get(self, headers: dict[str, str]) -> Response:
        """A GET sub-request of this object version with ``headers``; a 2xx response."""
        sub = object_subrequest(self.request, "GET", SWIFT_SOURCE, {**headers, **self.pin})
        resp = sub.get_response(self.app)
        if resp.status_int == 412:
            close_if_possible(resp.app_iter)
            raise ObjectChanged("the object was overwritten during the read")
        if resp.status_int not in (200, 206):
            # Plain-text bodies say why (a storlet that timed out); HTML ones are boilerplate.
            reason = b"".join(resp.app_iter)[:300].decode(errors="replace").strip() \
                if resp.content_type == "text/plain" else ""
            close_if_possible(resp.app_iter)
            raise IntegrityError(f"read of stored bytes failed: {resp.status} {reason}".strip())
        return resp

    def _read_ranged(self, start: int, end: int) -> Iterator[bytes]:
        resp = self.pinned_get({"Range": f"bytes={start}-{end - 1}"})
        offset = start if resp.status_int == 206 else 0
        try:
            for chunk in resp.app_iter:
                if resp.status_int == 200:
                    # A 200 carries the whole object: keep only [start, end).
                    chunk_start = offset
                    offset += len(chunk)
                    if offset <= start or chunk_start >= end:
                        continue
                    chunk = chunk[max(start - chunk_start, 0):end - chunk_start]
                yield chunk
        finally:
            close_if_possible(resp.app_iter)

    def close(self) -> None:
        if self._body_obj is not None:
            close_if_possible(self._body_obj)
            self._body = self._body_obj = None
