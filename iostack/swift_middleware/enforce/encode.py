"""The PUT path: run the body through the filters' encoders on its way to the object servers.

``EncodingInput`` replaces ``wsgi.input``: the proxy reads the stored bytes
from it while it reads the tenant's bytes from the client, hashing and
counting them. When the body is complete, the proxy asks for footers
(``swift.callback.update_footers``) and ``install_footers`` adds the filter
record, the tenant's ETag and size, and the container-update overrides. A
client ETag that does not match, a body shorter than its Content-Length or
longer than Swift's ``max_file_size``, or a filter that fails raise before
the footers are sent, so the object servers never commit the object:
nothing half-written becomes visible.

A pipeline whose filters all preserve bytes (``FilterSpec.preserves_bytes``)
needs none of that: ``EncodingInput(..., hash_body=False)`` runs the body
through them without hashing, the record travels in the request headers, and
the Content-Length, the client's ETag and the object servers' own MD5 work as
for a plain object (``install_record``). So does a pipeline whose other
filters find, from the body's first bytes, that they would store it
unchanged (``filters.base.keep_unchanged``: compression on incompressible
data): the proxy reads those bytes ahead (``BodyLookahead``) and replays them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from eventlet import patcher
from swift.common import constraints
from swift.common.exceptions import ChunkReadTimeout
from swift.common.request_helpers import get_container_update_override_key
from swift.common.swob import (
    HTTPClientDisconnect,
    HTTPInternalServerError,
    HTTPRequestEntityTooLarge,
    HTTPRequestTimeout,
    HTTPServiceUnavailable,
    HTTPUnprocessableEntity,
    Request,
    normalize_etag,
)

from iostack.filters.base import Encoder
from iostack.filters.errors import FilterError, FilterUnavailable
from iostack.stored_object import (
    ETAG_HEADER,
    SIZE_HEADER,
    TENANT_LAYER,
    AppliedFilter,
    record_headers,
)

READ_CHUNK = 65536

# Real OS threads and queues, also inside an eventlet-patched server.
_threading = patcher.original("threading")
_queue = patcher.original("queue")


class BackgroundMD5:
    """The MD5 of a body, computed on a native thread beside the event loop.

    hashlib releases the GIL while it hashes a chunk, so the tenant's ETag is
    computed on another core while the proxy keeps forwarding the body,
    instead of adding ~2 CPU s/GB to its one event loop. ``close`` ends the
    stream (also when the upload is abandoned); ``hexdigest`` waits for it.
    """

    def __init__(self) -> None:
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._chunks: Any = _queue.SimpleQueue()
        self._thread = _threading.Thread(target=self._run, name="iostack-md5", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            self._md5.update(chunk)

    def update(self, chunk: bytes) -> None:
        self._chunks.put(chunk)

    def close(self) -> None:
        self._chunks.put(None)

    def hexdigest(self) -> str:
        self.close()  # a no-op after the stream's own close; never waits forever
        self._thread.join()
        return self._md5.hexdigest()


class EncodingInput:
    """File-like ``wsgi.input`` that yields the encoded body."""

    def __init__(self, request: Request, encoders: list[tuple[AppliedFilter, Encoder]],
                 client_input=None, expected_length: int | None = None,
                 hash_body: bool = True) -> None:
        """Encode ``client_input`` (default: the request's body and its Content-Length).

        ``hash_body=False`` skips the MD5 of the client's bytes (``md5`` is then None).
        """
        self.request = request
        if client_input is None:
            client_input = request.environ["wsgi.input"]
            expected_length = request.content_length  # None for chunked uploads
        self.client_input = client_input
        self.expected_length = expected_length
        self.encoders = encoders
        self.md5 = BackgroundMD5() if hash_body else None
        self.received = 0
        stream: Iterator[bytes] = self._client_chunks()
        for _applied, encoder in encoders:
            stream = encoder.encode(stream)
        self._stream = stream
        self._pending = memoryview(b"")  # the part of the last encoded chunk not yet read
        self.done = False

    def _client_chunks(self) -> Iterator[bytes]:
        try:
            while True:
                chunk = self.client_input.read(READ_CHUNK)
                if not chunk:
                    break
                self.received += len(chunk)
                if self.received > constraints.MAX_FILE_SIZE:
                    # Swift's limit is on what the tenant stores, not on the
                    # encoded bytes the proxy server counts.
                    raise HTTPRequestEntityTooLarge(request=self.request)
                if self.md5:
                    self.md5.update(chunk)
                yield chunk
        finally:
            if self.md5:
                self.md5.close()
        if self.expected_length is not None and self.received != self.expected_length:
            raise HTTPClientDisconnect(
                request=self.request,
                body=f"body ended after {self.received} of {self.expected_length} bytes")

    def _next(self) -> bytes:
        """The next non-empty encoded chunk, or b"" at the end of the body."""
        try:
            for chunk in self._stream:
                if chunk:
                    return chunk
            return b""
        except FilterError as exc:
            error = HTTPServiceUnavailable if isinstance(exc, FilterUnavailable) \
                else HTTPInternalServerError
            raise error(request=self.request, body=f"IOStack filter failed: {exc}",
                        content_type="text/plain") from exc

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` encoded bytes (all with ``size < 0``); b"" at the end.

        Each byte is copied once at most: the proxy reads 64 KiB at a time, and
        slicing and growing bytes copied a frame's bytes two or three times.
        """
        if size >= 0 and not self._pending and not self.done:
            # The common case: hand over the encoder's chunk without copying it.
            chunk = self._next()
            if len(chunk) <= size:
                self.done = not chunk
                return chunk
            self._pending = memoryview(chunk)
        parts: list[memoryview] = []
        held = 0
        while not self.done and (size < 0 or held + len(self._pending) < size):
            if self._pending:
                parts.append(self._pending)
                held += len(self._pending)
            chunk = self._next()
            self.done = not chunk
            self._pending = memoryview(chunk)
        take = len(self._pending) if size < 0 else size - held
        parts.append(self._pending[:take])
        self._pending = self._pending[take:]
        return b"".join(parts)

    def record(self) -> list[AppliedFilter]:
        return applied_record(self.encoders)


class BodyLookahead:
    """``wsgi.input`` whose first bytes were read ahead, to decide how to store the body.

    ``chunks()`` reads the client's body, keeping what it read, and can be
    started again from the beginning; ``read`` then hands over what was kept
    before reading on. A client that stalls gets Swift's 408 after
    ``timeout`` seconds, one that breaks off its chunked body Swift's 499.
    """

    def __init__(self, request: Request, timeout: float) -> None:
        self.request = request
        self.client_input = request.environ["wsgi.input"]
        self.timeout = timeout
        self._kept: list[bytes] = []
        self._ended = False

    def chunks(self) -> Iterator[bytes]:
        yield from list(self._kept)
        while not self._ended:
            chunk = self._read_client(READ_CHUNK)
            self._ended = not chunk
            if chunk:
                self._kept.append(chunk)
                yield chunk

    def _read_client(self, size: int) -> bytes:
        try:
            with ChunkReadTimeout(self.timeout):
                return self.client_input.read(size)
        except ChunkReadTimeout:
            raise HTTPRequestTimeout(request=self.request) from None
        except (ValueError, OSError) as exc:  # eventlet's ChunkReadError, a reset
            raise HTTPClientDisconnect(request=self.request, body=f"body read failed: {exc}",
                                       content_type="text/plain") from None

    def read(self, size: int = -1) -> bytes:
        """What was kept first, a chunk at a time; then the client's body."""
        if size == 0:
            return b""
        if not self._kept:
            return b"" if self._ended else self.client_input.read(size)
        if size < 0:
            kept, self._kept = self._kept, []
            return b"".join([*kept, self.read()])
        chunk = self._kept.pop(0)
        if size < len(chunk):
            chunk, rest = chunk[:size], chunk[size:]
            self._kept.insert(0, rest)
        return chunk


def applied_record(encoders: list[tuple[AppliedFilter, Encoder]]) -> list[AppliedFilter]:
    """What each encoder did, with the sysmeta it asks to keep."""
    return [AppliedFilter(applied.name, applied.params, encoder.sysmeta())
            for applied, encoder in encoders]


def install_record(request: Request, encoders: list[tuple[AppliedFilter, Encoder]]) -> None:
    """Send the record of byte-preserving filters with the request's headers.

    Their sysmeta is known before the body, and the stored bytes are the
    tenant's: no ETag, size or container-update override of our own is needed
    (a GET finds the tenant's in Swift's own metadata).
    """
    request.headers.update(record_headers(TENANT_LAYER, applied_record(encoders)))


def install_footers(request: Request, body: EncodingInput, client_etag: str | None) -> None:
    """Register the footers callback that records what the encoders did."""
    inner = request.environ.get("swift.callback.update_footers")

    def footers_callback(footers: dict) -> None:
        if inner:
            inner(footers)
        if not body.done:
            # The proxy reads until EOF; anything else would record incomplete sysmeta.
            raise HTTPInternalServerError(request=request, body="IOStack: body not consumed")
        etag = body.md5.hexdigest()
        if client_etag is not None and normalize_etag(client_etag) != etag:
            raise HTTPUnprocessableEntity(
                request=request, body="Etag does not match the MD5 of the body sent",
                content_type="text/plain")
        footers.update(record_headers(TENANT_LAYER, body.record()))
        footers[ETAG_HEADER] = etag
        footers[SIZE_HEADER] = str(body.received)
        footers[get_container_update_override_key("etag")] = etag
        footers[get_container_update_override_key("size")] = str(body.received)
        # The object servers hash what they receive themselves; the client's ETag
        # (already checked above) is not the stored bytes' one.
        footers.pop("Etag", None)

    request.environ["swift.callback.update_footers"] = footers_callback
