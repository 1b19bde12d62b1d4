"""The contract between filters and the data path that drives them.

Write path (PUT): ``spec.encoder(params, context)`` returns an ``Encoder``
for one request. ``encoder.encode(chunks)`` turns the original body into the
stored body, streaming; once that iterator is exhausted, ``encoder.sysmeta()``
is the small ``str -> str`` dict the middleware must store with the object so
that the filter can be undone later (never a secret). Encoders chain: the
output of one is the input of the next. An encoder may also be able to tell
from a body's first bytes that transforming it does not pay
(``KeepsUnchanged``: compression on random bytes); the body is then stored
as it came, its sysmeta says so (``UNCHANGED``), and its view is the stored
object itself.

Read path (GET/HEAD/Range): the stored object is a ``ByteSource`` (the
middleware backs it with Swift range requests). ``spec.open_view(lower,
sysmeta, context)`` returns another ``ByteSource`` whose ``length`` is the
decoded length and whose ``read(start, end)`` fetches from ``lower`` only the
stored bytes that range needs. Views stack in the reverse order of the
encoders.

Record path (GET only): ``spec.selection(params, context)`` returns a
``Selection`` that turns the object's records, as the tenant stored them,
into an answer (CSV rows and columns, matching lines). It sees blocks of
whole records (``iostack.filters.records``); what it returns is sent instead
of the object. Nothing is stored: these filters shape answers, not objects.

Filters do their CPU work in C libraries that release the GIL (zlib,
zstandard, OpenSSL through ``cryptography``): ``context.offload``
(``iostack.filters.offload``) runs it in native threads, in batches, when
the data path serves from an eventlet hub.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from iostack.filters.errors import FilterError, IntegrityError
from iostack.filters.metadata import FilterMetadata, resolve_params
from iostack.filters.offload import INLINE, Offload


@runtime_checkable
class ByteSource(Protocol):
    """Random access to a byte string that may live elsewhere (a Swift object)."""

    @property
    def length(self) -> int: ...

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """Yield bytes ``[start, end)``; ``0 <= start <= end <= length``."""
        ...


class Encoder(Protocol):
    """One request's write-path transformation."""

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]: ...

    def sysmeta(self) -> dict[str, str]: ...


UNCHANGED = "unchanged"  # sysmeta key: "1" when the filter stored the body as it came


@runtime_checkable
class KeepsUnchanged(Protocol):
    """An encoder that can decide, before encoding, to store a body unchanged."""

    def keeps_unchanged(self, body: Iterable[bytes]) -> bool:
        """Read as much of ``body`` as the decision needs (the caller replays it).

        True: ``encode`` will pass the body through and ``sysmeta`` (available
        at once) records ``UNCHANGED``, so the data path can store it with
        Swift's own length and ETag, as for a plain object.
        """
        ...


def keep_unchanged(changing: list[Encoder], body: Callable[[], Iterable[bytes]]) -> bool:
    """Whether a body is stored as it came, by the choice of every encoder that would change it.

    ``changing`` are a pipeline's encoders that do not preserve bytes by
    nature; each must be able to keep a body unchanged and choose to.
    ``body()`` gives the body from its start each time (the data path
    replays what it read ahead). The first encoder that wants to encode ends
    the question.
    """
    if not all(isinstance(encoder, KeepsUnchanged) for encoder in changing):
        return False
    return all(encoder.keeps_unchanged(body()) for encoder in changing)


class Selection(Protocol):
    """One GET's record filter (``csv_select``, ``grep``).

    ``begin`` sees the object's first record (``None`` for an empty object)
    before any answer is sent, so a request that names an unknown column can
    still get a 400 (``ParamError``); it returns the bytes the answer starts
    with (a CSV header line, an Arrow schema). When ``skips_first_record`` is
    true and the answer covers the object's start, the first record is not
    passed to ``select`` (it is a header, not data); ``needs_first_record``
    asks for it even for a byte range that starts later (a JSON Lines
    selection takes its schema from it). ``end`` returns the
    bytes that close a complete answer (an Arrow stream's end marker).
    ``content_type`` is the answer's. A ``random_access`` selection
    (``parquet_select``) does not read records: the data path reads the
    object by ranges for it (``iostack.swift_middleware.select.parquet``).
    """

    skips_first_record: bool
    needs_first_record: bool
    content_type: str
    random_access: bool

    def begin(self, first_record: bytes | None, at_start: bool) -> bytes: ...

    def select(self, block: bytes) -> bytes: ...

    def end(self) -> bytes: ...


class KeyProvider(Protocol):
    """Gives the encryption filter a per-tenant key (see ``iostack.filters.tenant_keys``)."""

    def tenant_key(self, account: str) -> bytes: ...


@dataclass(frozen=True)
class FilterContext:
    """Who and what a request is about, plus deployment services filters need."""

    account: str
    container: str = ""
    obj: str = ""
    keys: KeyProvider | None = None
    offload: Offload = INLINE  # where CPU-heavy batches run (the middleware's setting)

    @property
    def path(self) -> str:
        return "/" + "/".join(p for p in (self.account, self.container, self.obj) if p)


EncoderFactory = Callable[[dict[str, Any], FilterContext], Encoder]
ViewFactory = Callable[[ByteSource, Mapping[str, str], FilterContext], ByteSource]
SelectionFactory = Callable[[dict[str, Any], FilterContext], Selection]
ParamCheck = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class FilterSpec:
    """A registered filter: its metadata and, for body transforms, its factories."""

    metadata: FilterMetadata
    make_encoder: EncoderFactory | None = None
    make_view: ViewFactory | None = None
    make_selection: SelectionFactory | None = None
    # Rules across parameters that metadata cannot express (gzip levels stop at 9).
    check_params: ParamCheck | None = None
    # The encoder passes every byte through unchanged and its sysmeta does not
    # depend on the body (it may be asked for before encoding starts). The data
    # path then records the filter up front and lets Swift's own ETag, length
    # and body checks stand: no MD5 of its own, no footers.
    preserves_bytes: bool = False

    @property
    def name(self) -> str:
        return self.metadata.name

    def stored_unchanged(self, sysmeta: Mapping[str, str]) -> bool:
        """Whether the object stores the bytes this filter received (and so the tenant's
        own length and ETag, when every filter did)."""
        return self.preserves_bytes or sysmeta.get(UNCHANGED) == "1"

    @property
    def transforms_body(self) -> bool:
        return self.make_encoder is not None

    def validate(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``params`` as the data path will; return them typed, defaults filled.

        ``metadata.resolve_params`` (the one path every parameter takes), then
        the filter's own cross-parameter rules. The controller calls this when
        it compiles a policy, so a bad value is refused then rather than on
        the first PUT; ``ParamError`` says which parameter and why.
        """
        resolved = resolve_params(self.metadata, params or {})
        if self.check_params is not None:
            self.check_params(resolved)
        return resolved

    @property
    def selects_records(self) -> bool:
        return self.make_selection is not None

    def selection(self, params: Mapping[str, Any] | None, context: FilterContext) -> Selection:
        if self.make_selection is None:
            raise FilterError(f"filter {self.name!r} does not select records")
        return self.make_selection(self.validate(params), context)

    def encoder(self, params: Mapping[str, Any] | None, context: FilterContext, *,
                validated: bool = False) -> Encoder:
        """One request's encoder. ``validated``: ``params`` are what ``validate`` returned
        (the caller keeps them for the object's record), so they are not checked twice."""
        if self.make_encoder is None:
            raise FilterError(f"filter {self.name!r} does not transform object bodies")
        return self.make_encoder(dict(params or {}) if validated else self.validate(params),
                                 context)

    def open_view(
        self, lower: ByteSource, sysmeta: Mapping[str, str], context: FilterContext
    ) -> ByteSource:
        if self.make_view is None:
            raise FilterError(f"filter {self.name!r} does not transform object bodies")
        if sysmeta.get(UNCHANGED) == "1":
            return lower
        return self.make_view(lower, sysmeta, context)


def check_range(start: int, end: int, length: int) -> None:
    """Reject a read outside ``[0, length]``: a caller bug, not a client error."""
    if not 0 <= start <= end <= length:
        raise ValueError(f"read [{start}, {end}) outside [0, {length}]")


def clip(data: bytes, offset: int, start: int, end: int) -> bytes:
    """The part of ``data``, which begins at ``offset``, that lies in ``[start, end)``."""
    if start <= offset and offset + len(data) <= end:
        return data
    return data[max(start - offset, 0) : end - offset]


def reframe(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """Re-cut a stream into pieces of exactly ``size`` bytes, the last one shorter.

    Yields nothing for an empty stream. Holds at most one piece plus one chunk.
    Each byte is copied once at most (views of the chunks are joined), which
    matters on the PUT path: growing and slicing one buffer copied it four times.
    """
    parts: list[memoryview] = []
    held = 0
    for chunk in chunks:
        # Views must not see a buffer change under them: keep immutable bytes only.
        chunk = chunk if isinstance(chunk, bytes) else bytes(chunk)
        if not parts and len(chunk) == size:
            yield chunk
            continue
        view = memoryview(chunk)
        while held + len(view) >= size:
            take = size - held
            parts.append(view[:take])
            yield b"".join(parts)
            parts, held, view = [], 0, view[take:]
        if view:
            parts.append(view)
            held += len(view)
    if parts:
        yield b"".join(parts)


def split_exact(chunks: Iterable[bytes], sizes: Iterable[int]) -> Iterator[bytes]:
    """Cut a stream into pieces of the given sizes; the stream must hold exactly that much.

    Each byte is copied once at most (views of the chunks are joined), and a
    piece that is a whole chunk not at all: on the GET path every stored byte
    passes here, and growing and slicing one buffer copied it three times.
    """
    it = iter(chunks)
    rest = memoryview(b"")  # the part of the current chunk not yet cut
    for size in sizes:
        parts: list[memoryview] = []
        held = 0
        while held + len(rest) < size:
            if rest:
                parts.append(rest)
                held += len(rest)
            chunk = next(it, None)
            if chunk is None:
                raise IntegrityError(f"stored data ended early: {size - held} bytes missing")
            # Views must not see a buffer change under them: keep immutable bytes only.
            rest = memoryview(chunk if isinstance(chunk, bytes) else bytes(chunk))
        piece, rest = rest[: size - held], rest[size - held :]
        if not parts and len(piece) == len(piece.obj):
            yield piece.obj  # type: ignore[misc]  # a whole chunk: bytes, checked above
        else:
            parts.append(piece)
            yield b"".join(parts)
    if rest or next(it, b""):
        raise IntegrityError("stored data is longer than its index says")


def sysmeta_int(sysmeta: Mapping[str, str], key: str, filter_name: str) -> int:
    """An integer the filter recorded at PUT; a missing or bad one means the object is damaged."""
    try:
        value = int(sysmeta[key])
    except (KeyError, ValueError):
        raise IntegrityError(
            f"{filter_name}: object sysmeta {key!r} is missing or not an integer"
        ) from None
    if value < 0:
        raise IntegrityError(f"{filter_name}: object sysmeta {key!r} is negative")
    return value


class RangedSource:
    """What every ``ByteSource`` here shares: ``length`` and the checked ``read``.

    A subclass sets ``_length`` (or overrides ``length``) and implements
    ``_read`` for a non-empty ``[start, end)`` inside ``[0, length]``; ``read``
    refuses any other range at once (``check_range``) and answers an empty
    one with no bytes, without calling ``_read``.
    """

    _length: int

    @property
    def length(self) -> int:
        return self._length

    def read(self, start: int, end: int) -> Iterator[bytes]:
        check_range(start, end, self.length)
        if start == end:
            return iter(())
        return self._read(start, end)

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        raise NotImplementedError


class BytesSource(RangedSource):
    """A ``ByteSource`` over bytes in memory: for tests and small payloads."""

    def __init__(self, data: bytes, chunk_size: int = 65536) -> None:
        self._data = memoryview(bytes(data))
        self._length = len(self._data)
        self._chunk_size = chunk_size

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        for pos in range(start, end, self._chunk_size):
            yield bytes(self._data[pos : min(end, pos + self._chunk_size)])


def read_all(source: ByteSource, start: int = 0, end: int | None = None) -> bytes:
    """Convenience for tests and small objects: join ``source.read(start, end)``."""
    return b"".join(source.read(start, source.length if end is None else end))
