"""Helpers for the filter library's unit tests: counting sources, streamed bodies, encode."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterable, Iterator

from iostack.filters.base import BytesSource, FilterContext, FilterSpec, RangedSource


class CountingSource:
    """Wraps a ByteSource and records every ``read(start, end)`` the view makes."""

    def __init__(self, lower) -> None:
        self._lower = lower
        self.reads: list[tuple[int, int]] = []

    @property
    def length(self) -> int:
        return self._lower.length

    @property
    def bytes_read(self) -> int:
        return sum(end - start for start, end in self.reads)

    def read(self, start: int, end: int) -> Iterator[bytes]:
        self.reads.append((start, end))
        return self._lower.read(start, end)


class FileSource(RangedSource):
    """A ByteSource over a file on disk, for bodies too big to keep in memory."""

    def __init__(self, path: str, chunk_size: int = 1 << 20) -> None:
        self._path = path
        self._chunk_size = chunk_size
        self._length = os.path.getsize(path)

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        with open(self._path, "rb") as f:
            f.seek(start)
            while start < end:
                data = f.read(min(self._chunk_size, end - start))
                start += len(data)
                yield data


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def log_text(size: int, seed: int = 1) -> bytes:
    """Redundant log-like text: a proxy access log with few clients, paths and statuses."""
    rng = random.Random(seed)
    clients = [f"10.0.{i}.{17 * i + 3}" for i in range(8)]
    paths = [f"/v1/AUTH_t{i % 3 + 1}/logs/app-{i}.log" for i in range(20)]
    statuses = ["200"] * 12 + ["201", "204", "404", "499"]
    lines = []
    total = 0
    second = 0
    while total < size:
        second += rng.randrange(2)
        line = (
            f"2026-11-21T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z "
            f"proxy-server: {rng.choice(clients)} - - {rng.choice(['GET', 'GET', 'PUT'])} "
            f"{rng.choice(paths)} HTTP/1.1 {rng.choice(statuses)} - python-swiftclient "
            f"{rng.choice(['1024', '4096', '65536', '1048576'])} - tx{len(lines):08x}-iostack\n"
        ).encode()
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size]


def streamed_body(total: int, kind: str, chunk: int = 1 << 20) -> Iterator[bytes]:
    """``total`` bytes of log text or random bytes, generated chunk by chunk."""
    rng = random.Random(7)
    block = log_text(chunk) if kind == "text" else b""
    made = 0
    number = 0
    while made < total:
        size = min(chunk, total - made)
        if kind == "text":
            # A varying prefix keeps frames from being identical copies of each other.
            piece = (b"%08d " % number + block)[:size]
        else:
            piece = rng.randbytes(size)
        made += size
        number += 1
        yield piece


def sha256_of(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def encode(spec: FilterSpec, params, context: FilterContext, data: bytes, chunk: int = 10_000):
    """Run one PUT through ``spec``: (stored bytes, sysmeta)."""
    encoder = spec.encoder(params, context)
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    stored = b"".join(encoder.encode(pieces))
    return stored, encoder.sysmeta()


def view_of(spec: FilterSpec, stored: bytes, sysmeta, context: FilterContext):
    return spec.open_view(BytesSource(stored), sysmeta, context)


def encode_chain(stages, context: FilterContext, chunks):
    """Chain the encoders of ``stages`` ([(spec, params)]) as the PUT path does.

    Returns (stored chunk iterator, encoders); read sysmeta after exhausting it.
    """
    encoders = [spec.encoder(params, context) for spec, params in stages]
    stream = chunks
    for encoder in encoders:
        stream = encoder.encode(stream)
    return stream, encoders


def open_chain(stages, lower, sysmetas, context: FilterContext):
    """Stack the views in reverse order of the encoders, as the GET path does."""
    view = lower
    for (spec, _), sysmeta in reversed(list(zip(stages, sysmetas, strict=True))):
        view = spec.open_view(view, sysmeta, context)
    return view


def store_chain(stages, context: FilterContext, data: bytes, chunk: int = 10_000):
    """(stored bytes, sysmetas) for ``data`` written through ``stages``."""
    stream, encoders = encode_chain(stages, context, chunked(data, chunk))
    stored = b"".join(stream)
    return stored, [encoder.sysmeta() for encoder in encoders]
