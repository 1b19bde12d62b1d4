"""``encryption``: AES-256-GCM in fixed-size authenticated frames.

Config
    proxy: ``key_file`` (see ``iostack.filters.tenant_keys``); the middleware builds a
    ``KeyFileProvider`` once and passes it in ``FilterContext.keys``.
    policy: ``frame_size`` plaintext bytes per frame (default 256 KiB).

Keys: tenant key = HKDF(root secret, account); object key = HKDF(tenant key,
salt = 16 random bytes chosen at PUT and kept in sysmeta). Every object has
its own key, so the nonce can simply be the frame number without ever
repeating under one key; a wrong tenant gets a different key.

Stored layout: frame i = AES-GCM(plaintext[i*F : (i+1)*F]) followed by its
16-byte tag; nonce = frame number (8 bytes) + last-frame flag (4 bytes); the
associated data binds the format version and frame size. An empty body is one
empty final frame. Hence the stored length is ``L + 16 * max(1, ceil(L/F))``
and the plaintext length is computable from the stored length without an
index. Swapping, reordering or moving frames between objects breaks their
tags; truncation at a frame boundary leaves a last frame without the final
flag, which also fails. Sysmeta holds the frame size, the salt and the
plaintext length (checked against the stored length on open); the object
path is not bound, so server-side copies within an account stay readable.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from iostack.filters.base import (
    ByteSource,
    FilterContext,
    FilterSpec,
    RangedSource,
    clip,
    reframe,
    split_exact,
    sysmeta_int,
)
from iostack.filters.errors import ConfigError, FilterError, IntegrityError
from iostack.filters.metadata import FilterMetadata, Param
from iostack.filters.tenant_keys import hkdf

KIB = 1024
MIB = 1024 * KIB

METADATA = FilterMetadata(
    name="encryption",
    description=(
        "Encrypts object bodies with AES-256-GCM in fixed-size authenticated frames under a "
        "per-object key derived from the tenant's key; Range-capable; tampering, truncation "
        "and reordering are detected on GET."
    ),
    params=(
        Param("frame_size", "size", default=256 * KIB, minimum=4 * KIB, maximum=4 * MIB,
              unit="bytes", description="plaintext bytes per authenticated frame"),
    ),
    methods=frozenset({"PUT"}),
    stages=frozenset({"proxy"}),
    changes_size=True,
    layout_group="encryption",
    extra={"range_capable": True, "proxy_config": ["key_file"]},
)

TAG_BYTES = 16
SALT_BYTES = 16
ALGORITHM = "AES-256-GCM"
_NONCE = struct.Struct(">QI")  # frame number, last-frame flag: 12 bytes
_AAD = struct.Struct(">8sI")  # format version, frame size
_VERSION = b"IOSENC01"


class _FrameCipher:
    """AES-GCM with this object's key and frame size."""

    def __init__(self, context: FilterContext, salt: bytes, frame_size: int) -> None:
        if context.keys is None:
            raise ConfigError("encryption needs a key provider: set key_file in the proxy config")
        tenant_key = context.keys.tenant_key(context.account)
        self._aead = AESGCM(hkdf(tenant_key, b"iostack/encryption/v1/object", salt=salt))
        self._aad = _AAD.pack(_VERSION, frame_size)

    def seal(self, number: int, data: bytes, last: bool) -> bytes:
        return self._aead.encrypt(_NONCE.pack(number, last), data, self._aad)

    def open(self, number: int, blob: bytes, last: bool) -> bytes:
        return self._aead.decrypt(_NONCE.pack(number, last), blob, self._aad)


class EncryptionEncoder:
    """Encrypts one body; holds one frame back to know which one is last."""

    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        self._frame_size = params["frame_size"]
        self._salt = os.urandom(SALT_BYTES)
        self._cipher = _FrameCipher(context, self._salt, self._frame_size)
        self._offload = context.offload
        self._length: int | None = None

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        frames = self._numbered(reframe(chunks, self._frame_size))
        yield from self._offload.map(self._seal_all, frames, lambda frame: len(frame[1]))

    def _numbered(self, frames: Iterable[bytes]) -> Iterator[tuple[int, bytes, bool]]:
        """(number, frame, last): holds one frame back to know which one is last;
        an empty body is one empty last frame."""
        length = number = 0
        pending = b""
        for frame in frames:
            if length:
                yield number, pending, False
                number += 1
            pending = frame
            length += len(frame)
        yield number, pending, True
        self._length = length

    def _seal_all(self, frames: list[tuple[int, bytes, bool]]) -> list[bytes]:
        return [self._cipher.seal(*frame) for frame in frames]

    def sysmeta(self) -> dict[str, str]:
        if self._length is None:
            raise FilterError("encryption: sysmeta() asked for before the body was encoded")
        return {
            "v": "1",
            "alg": ALGORITHM,
            "frame": str(self._frame_size),
            "salt": self._salt.hex(),
            "len": str(self._length),
        }


def stored_length(length: int, frame_size: int) -> int:
    """Stored bytes for ``length`` plaintext bytes."""
    return length + TAG_BYTES * max(1, -(-length // frame_size))


class EncryptionView(RangedSource):
    """The plaintext of an encrypted object, decrypted frame by frame."""

    def __init__(self, lower: ByteSource, sysmeta: Mapping[str, str], context: FilterContext):
        self._lower = lower
        self._path = context.path
        if sysmeta.get("alg") != ALGORITHM:
            raise IntegrityError(f"{self._path}: unknown encryption {sysmeta.get('alg')!r}")
        self._frame_size = sysmeta_int(sysmeta, "frame", METADATA.name)
        try:
            salt = bytes.fromhex(sysmeta["salt"])
        except (KeyError, ValueError):
            salt = b""
        if len(salt) != SALT_BYTES or self._frame_size == 0:
            raise IntegrityError(f"{self._path}: encryption sysmeta is damaged")
        self._cipher = _FrameCipher(context, salt, self._frame_size)
        self._offload = context.offload
        self._block = self._frame_size + TAG_BYTES
        self._frames = max(1, -(-lower.length // self._block))
        self._length = lower.length - TAG_BYTES * self._frames
        if self._length < 0 or stored_length(self._length, self._frame_size) != lower.length:
            raise IntegrityError(f"{self._path}: {lower.length} stored bytes cannot hold "
                                 f"{self._frame_size}-byte encrypted frames")
        if sysmeta_int(sysmeta, "len", METADATA.name) != self._length:
            raise IntegrityError(f"{self._path}: encrypted object was truncated or extended")

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        first, last = start // self._frame_size, (end - 1) // self._frame_size
        stored_end = min((last + 1) * self._block, self._lower.length)
        stored = self._lower.read(first * self._block, stored_end)
        sizes = [self._block] * (last - first) + [stored_end - last * self._block]
        blobs = enumerate(split_exact(stored, sizes), start=first)
        opened = self._offload.map(self._open_all, blobs, lambda blob: len(blob[1]))
        for number, data in enumerate(opened, start=first):
            yield clip(data, number * self._frame_size, start, end)

    def _open_all(self, blobs: list[tuple[int, bytes]]) -> list[bytes]:
        return [self._open(number, blob) for number, blob in blobs]

    def _open(self, number: int, blob: bytes) -> bytes:
        try:
            return self._cipher.open(number, blob, last=number == self._frames - 1)
        except InvalidTag:
            raise IntegrityError(
                f"{self._path}: encrypted frame {number} fails authentication (tampered, "
                f"truncated, reordered, another object's data or another tenant's key)"
            ) from None


SPEC = FilterSpec(METADATA, make_encoder=EncryptionEncoder, make_view=EncryptionView)
