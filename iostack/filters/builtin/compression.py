"""``compression``: framed gzip or zstd, with Range reads.

Config (policy parameters)
    algorithm   ``zstd`` (default: fast and dense) or ``gzip`` (RFC 1952, as
                in the IOStack paper)
    level       gzip 1-9 (default 6), zstd 1-22 (default 3)
    frame_size  original bytes per frame (default 256 KiB)

Stored layout::

    frame 0 | frame 1 | ... | frame n-1 | index trailer

Every frame holds ``frame_size`` original bytes (the last one fewer) and is
decodable on its own: a complete gzip member (``gzip -d`` reads one) or zstd
frame (with its content checksum), or the raw bytes when compressing did not
pay. The trailer lists each frame's stored length, kind and CRC-32 and ends
with its own CRC-32; sysmeta records the trailer length, so a Range GET reads
the trailer and then exactly the frames that overlap the range. A trailer of
up to ``INLINE_INDEX_MAX`` bytes is also copied, base64, into sysmeta
(``index``): then a read needs no request for it at all.

Why 256 KiB frames: gzip's window is 32 KiB and zstd's ratio barely improves
beyond a few hundred KiB at its fast levels, while a one-byte Range read has
to fetch and decompress a whole frame (256 KiB costs well under a
millisecond); the index stays ~9 bytes per frame.

Incompressible data: before compressing a frame, its first 16 KiB are
probed at the fastest level; a frame whose probe or full result saves less
than a few percent is stored raw. After four raw frames in a row the encoder
stops trying for the rest of the object and records where (``gave_up``).

Better still, the proxy asks before it sends anything (``keeps_unchanged``):
if the first four frames (or the whole of a shorter body) would all be
stored raw, the body is stored exactly as it came, with no frames and no
trailer, and sysmeta records ``unchanged``. Such an object costs what a
plain one costs: Swift's own length, ETag and MD5, no re-framing, no CRCs,
and a read is the stored object itself. The decision is the one the encoder
would reach by giving up, taken four frames sooner; it reads at most those
frames ahead (1 MiB by default), and only while they keep failing to
compress.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import accumulate, islice
from typing import Any

import zstandard

from iostack.filters.base import (
    UNCHANGED,
    ByteSource,
    FilterContext,
    FilterSpec,
    RangedSource,
    clip,
    reframe,
    split_exact,
    sysmeta_int,
)
from iostack.filters.errors import FilterError, IntegrityError, ParamError
from iostack.filters.metadata import FilterMetadata, Param

KIB = 1024
MIB = 1024 * KIB

METADATA = FilterMetadata(
    name="compression",
    description=(
        "Compresses object bodies (gzip or zstd) in independently decodable frames with an "
        "index, so Range GETs decompress only the frames they need; stores incompressible "
        "frames raw."
    ),
    params=(
        Param("algorithm", "enum", default="zstd", choices=("gzip", "zstd"),
              description="gzip: RFC 1952 members readable by gzip(1); zstd: faster, denser"),
        Param("level", "int", default=None, minimum=1, maximum=22,
              description="compression level: gzip 1-9 (default 6), zstd 1-22 (default 3)"),
        Param("frame_size", "size", default=256 * KIB, minimum=64 * KIB, maximum=8 * MIB,
              unit="bytes", description="original bytes per independently decodable frame"),
    ),
    methods=frozenset({"PUT"}),
    stages=frozenset({"proxy", "object"}),
    changes_size=True,
    layout_group="compression",
    runs_before=("encryption",),
    extra={"range_capable": True},
)

PROBE_BYTES = 16 * KIB
PROBE_MAX_RATIO = 0.9  # a probe that keeps more than this is not worth a full pass
KEEP_MAX_RATIO = 0.97  # store raw unless compression saves at least 3%
# An index up to this size (~80 frames: 20 MiB at the default frame size) is
# also kept, base64, in sysmeta: reads then need no request for the trailer.
INLINE_INDEX_MAX = 1024
GIVE_UP_AFTER = 4  # consecutive raw frames before the encoder stops trying

KIND_RAW = 0
KIND_COMPRESSED = 1

_MAGIC = b"IOSCMP01"
_HEADER = struct.Struct(">8sBIQQ")  # magic, codec id, frame size, original length, frames
_ENTRY = struct.Struct(">IBI")  # stored length, kind, CRC-32 of the stored frame
_CRC = struct.Struct(">I")


class _Gzip:
    """RFC 1952 members through zlib (``wbits=31``)."""

    name = "gzip"
    codec_id = 1
    levels = (1, 9)
    default_level = 6

    def __init__(self, level: int) -> None:
        self.level = level

    def compress(self, data: bytes) -> bytes:
        return zlib.compress(data, self.level, wbits=31)

    def release(self) -> None:
        """Nothing to give back: zlib keeps no state between calls."""

    @staticmethod
    def probe(data: bytes) -> int:
        return len(zlib.compress(data, 1, wbits=-15))

    @staticmethod
    def decoder() -> Callable[[bytes, int], bytes]:
        return _gunzip


PROBE_LEVEL = 1


class _IdleZstdCompressors:
    """zstd compressors between two bodies, by level.

    A new compressor allocates and fills its tables on first use (~0.3 ms of
    a 1 MiB PUT); ``compress()`` starts afresh on every call, so one can serve
    body after body. A compressor must not be used by two threads at once:
    each is lent to one encoder at a time.
    """

    KEEP = 8  # per level: enough for the concurrent PUTs of one worker

    def __init__(self) -> None:
        self._idle: dict[int, list[zstandard.ZstdCompressor]] = {}
        self._lock = threading.Lock()

    def take(self, level: int) -> zstandard.ZstdCompressor:
        with self._lock:
            idle = self._idle.get(level)
            if idle:
                return idle.pop()
        return zstandard.ZstdCompressor(level=level, write_checksum=True,
                                        write_content_size=True)

    def give(self, level: int, compressor: zstandard.ZstdCompressor) -> None:
        with self._lock:
            idle = self._idle.setdefault(level, [])
            if len(idle) < self.KEEP:
                idle.append(compressor)


_IDLE_ZSTD = _IdleZstdCompressors()


class _Zstd:
    """zstd frames with content size and checksum."""

    name = "zstd"
    codec_id = 2
    levels = (1, 22)
    default_level = 3

    def __init__(self, level: int) -> None:
        self.level = level
        self._compressor = _IDLE_ZSTD.take(level)
        self._prober = _IDLE_ZSTD.take(PROBE_LEVEL)

    def compress(self, data: bytes) -> bytes:
        return self._compressor.compress(data)

    def probe(self, data: bytes) -> int:
        return len(self._prober.compress(data))

    def release(self) -> None:
        _IDLE_ZSTD.give(self.level, self._compressor)
        _IDLE_ZSTD.give(PROBE_LEVEL, self._prober)

    @staticmethod
    def decoder() -> Callable[[bytes, int], bytes]:
        decompressor = zstandard.ZstdDecompressor()
        return lambda data, size: decompressor.decompress(data, max_output_size=size)


def _gunzip(data: bytes, size: int) -> bytes:
    inflater = zlib.decompressobj(31)
    out = inflater.decompress(data, size + 1)
    if not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
        raise zlib.error("gzip member is incomplete or followed by extra data")
    return out


_CODECS = {codec.name: codec for codec in (_Gzip, _Zstd)}
_CODEC_ERRORS = (zlib.error, zstandard.ZstdError)


def check_params(params: dict[str, Any]) -> None:
    """Levels depend on the algorithm: gzip stops at 9; no level is the algorithm's
    default, filled in here so that ``validate`` (and explain) shows the one that runs."""
    codec = _CODECS[params["algorithm"]]
    low, high = codec.levels
    level = params["level"]
    if level is not None and not low <= level <= high:
        raise ParamError(METADATA.name, "level",
                         f"{params['algorithm']} accepts {low}-{high}, got {level}")
    if level is None:
        params["level"] = codec.default_level


class CompressionEncoder:
    """Compresses one body into frames followed by the index trailer."""

    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        codec = _CODECS[params["algorithm"]]
        self._codec = codec(params["level"] or codec.default_level)
        self._frame_size = params["frame_size"]
        self._offload = context.offload
        self._entries: list[tuple[int, int, int]] = []
        self._length = 0
        self._raw_streak = 0
        self._gave_up_at: int | None = None
        self._trailer_length: int | None = None
        self._compressing = False
        self._unchanged = False

    def keeps_unchanged(self, body: Iterable[bytes]) -> bool:
        """Store the body as it comes if its first ``GIVE_UP_AFTER`` frames would be raw.

        Reads frames from ``body`` until one compresses (then False: encode as
        usual) or the sample, or the body, ends. Only the fast probe decides a
        full frame; a short one (a small body) is compressed to find out.
        """
        for frame in islice(reframe(body, self._frame_size), GIVE_UP_AFTER):
            if len(frame) > 2 * PROBE_BYTES:
                if not self._probe_says_raw(frame):
                    return False
            elif self._compress(frame) is not None:
                return False
        self._unchanged = True
        return True

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        try:
            if self._unchanged:
                yield from chunks
                return
            yield from self._offload.map(self._store, reframe(chunks, self._frame_size), len)
            trailer = self._trailer()
            self._trailer_length = len(trailer)
            yield trailer
        finally:  # also when the upload is abandoned
            # ...but not while a thread still compresses with the codec (a timeout
            # abandoned the request mid-batch): another request must not share it.
            if not self._compressing:
                self._codec.release()

    def _store(self, frames: list[bytes]) -> list[bytes]:
        """``frames`` as stored, compressed or raw, with their index entries recorded."""
        self._compressing = True
        try:
            return [self._store_one(frame) for frame in frames]
        finally:
            self._compressing = False

    def _store_one(self, frame: bytes) -> bytes:
        self._length += len(frame)
        stored = None if self._gave_up_at is not None else self._compress(frame)
        if stored is None:
            stored, kind = frame, KIND_RAW
            self._raw_streak += 1
            if self._gave_up_at is None and self._raw_streak >= GIVE_UP_AFTER:
                self._gave_up_at = len(self._entries) + 1
        else:
            kind, self._raw_streak = KIND_COMPRESSED, 0
        self._entries.append((len(stored), kind, zlib.crc32(stored)))
        return stored

    def _compress(self, frame: bytes) -> bytes | None:
        if len(frame) > 2 * PROBE_BYTES and self._probe_says_raw(frame):
            return None
        packed = self._codec.compress(frame)
        return packed if len(packed) <= KEEP_MAX_RATIO * len(frame) else None

    def _probe_says_raw(self, frame: bytes) -> bool:
        return self._codec.probe(frame[:PROBE_BYTES]) > PROBE_MAX_RATIO * PROBE_BYTES

    def _trailer(self) -> bytes:
        body = b"".join(
            [
                _HEADER.pack(_MAGIC, self._codec.codec_id, self._frame_size, self._length,
                             len(self._entries)),
                *(_ENTRY.pack(*entry) for entry in self._entries),
            ]
        )
        return body + _CRC.pack(zlib.crc32(body))

    def sysmeta(self) -> dict[str, str]:
        if self._unchanged:
            return {"v": "1", "alg": self._codec.name, "level": str(self._codec.level),
                    "frame": str(self._frame_size), UNCHANGED: "1"}
        if self._trailer_length is None:
            raise FilterError("compression: sysmeta() asked for before the body was encoded")
        meta = {
            "v": "1",
            "alg": self._codec.name,
            "level": str(self._codec.level),
            "frame": str(self._frame_size),
            "len": str(self._length),
            "trailer": str(self._trailer_length),
            "frames": str(len(self._entries)),
            "raw": str(sum(1 for _, kind, _ in self._entries if kind == KIND_RAW)),
        }
        if self._gave_up_at is not None:
            meta["gave_up"] = str(self._gave_up_at)
        if self._trailer_length <= INLINE_INDEX_MAX:
            meta["index"] = base64.b64encode(self._trailer()).decode("ascii")
        return meta


class _Index:
    """The parsed trailer: where each frame is stored and how."""

    def __init__(self, offsets: list[int], entries: list[tuple[int, int, int]]) -> None:
        self.offsets = offsets  # offsets[i] = stored offset of frame i; offsets[-1] = end
        self.entries = entries


class CompressionView(RangedSource):
    """The original bytes of a compressed object, read frame by frame."""

    def __init__(self, lower: ByteSource, sysmeta: Mapping[str, str], context: FilterContext):
        self._lower = lower
        self._path = context.path
        algorithm = sysmeta.get("alg", "")
        if algorithm not in _CODECS:
            raise IntegrityError(f"{self._path}: unknown compression algorithm {algorithm!r}")
        self._codec_id = _CODECS[algorithm].codec_id
        self._decompress = _CODECS[algorithm].decoder()
        self._frame_size = sysmeta_int(sysmeta, "frame", METADATA.name)
        self._length = sysmeta_int(sysmeta, "len", METADATA.name)
        self._trailer_length = sysmeta_int(sysmeta, "trailer", METADATA.name)
        if self._frame_size == 0 or self._trailer_length > lower.length:
            raise IntegrityError(f"{self._path}: compression sysmeta does not fit the object")
        self._inline_index = sysmeta.get("index")
        self._index: _Index | None = None
        self._offload = context.offload

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        index = self._load_index()
        first, last = start // self._frame_size, (end - 1) // self._frame_size
        stored = self._lower.read(index.offsets[first], index.offsets[last + 1])
        sizes = (entry[0] for entry in index.entries[first : last + 1])
        blobs = enumerate(split_exact(stored, sizes), start=first)
        # Batches weigh what they decode to: 1 MiB of stored frames may be far more.
        decoded = self._offload.map(self._decode_all, blobs, lambda _: self._frame_size)
        for number, data in enumerate(decoded, start=first):
            yield clip(data, number * self._frame_size, start, end)

    def _decode_all(self, blobs: list[tuple[int, bytes]]) -> list[bytes]:
        return [self._decode(number, blob) for number, blob in blobs]

    def _decode(self, number: int, blob: bytes) -> bytes:
        _, kind, crc = self._load_index().entries[number]
        size = min(self._frame_size, self._length - number * self._frame_size)
        if zlib.crc32(blob) != crc:
            raise IntegrityError(f"{self._path}: compressed frame {number} fails its CRC")
        if kind == KIND_RAW:
            data = blob
        else:
            try:
                data = self._decompress(blob, size)
            except _CODEC_ERRORS as exc:
                raise IntegrityError(f"{self._path}: frame {number} is corrupt: {exc}") from exc
        if len(data) != size:
            raise IntegrityError(f"{self._path}: frame {number} decodes to {len(data)} bytes, "
                                 f"expected {size}")
        return data

    def _load_index(self) -> _Index:
        if self._index is None:
            end = self._lower.length
            if self._inline_index is not None:
                try:
                    trailer = base64.b64decode(self._inline_index, validate=True)
                except (binascii.Error, ValueError):
                    raise IntegrityError(f"{self._path}: compression index in sysmeta is not "
                                         "base64") from None
                if len(trailer) != self._trailer_length:
                    raise IntegrityError(f"{self._path}: compression index in sysmeta has "
                                         "the wrong length")
            else:
                trailer = b"".join(self._lower.read(end - self._trailer_length, end))
            self._index = self._parse(trailer, end - self._trailer_length)
        return self._index

    def _parse(self, trailer: bytes, data_length: int) -> _Index:
        def damaged(why: str) -> IntegrityError:
            return IntegrityError(f"{self._path}: compression index {why}")

        if len(trailer) < _HEADER.size + _CRC.size:
            raise damaged("is too short")
        body, (crc,) = trailer[: -_CRC.size], _CRC.unpack(trailer[-_CRC.size :])
        if zlib.crc32(body) != crc:
            raise damaged("fails its CRC")
        magic, codec_id, frame_size, length, frames = _HEADER.unpack_from(body)
        if (magic, codec_id, frame_size, length) != (
            _MAGIC, self._codec_id, self._frame_size, self._length
        ):
            raise damaged("does not match the object's sysmeta")
        if frames != math.ceil(length / frame_size) or len(body) != (
            _HEADER.size + frames * _ENTRY.size
        ):
            raise damaged("has the wrong number of frames")
        entries = list(_ENTRY.iter_unpack(body[_HEADER.size :]))
        offsets = [0, *accumulate(entry[0] for entry in entries)]
        if offsets[-1] != data_length:
            raise damaged(f"covers {offsets[-1]} stored bytes, the object has {data_length}")
        return _Index(offsets, entries)


SPEC = FilterSpec(METADATA, make_encoder=CompressionEncoder, make_view=CompressionView,
                  check_params=check_params)
