"""encryption: framed AES-256-GCM; every kind of tampering is an integrity error."""

from __future__ import annotations

import os

import pytest
from filters_testlib import CountingSource, store_chain

from iostack.filters.base import BytesSource, FilterContext, read_all
from iostack.filters.builtin import encryption
from iostack.filters.errors import ConfigError, IntegrityError, ParamError
from iostack.filters.library import get_filter
from iostack.filters.tenant_keys import KeyFileProvider, create_key_file

KIB = 1024
F = 4 * KIB
BLOCK = F + encryption.TAG_BYTES
SPEC = get_filter("encryption")


def put(context, data: bytes):
    stored, (sysmeta,) = store_chain([(SPEC, {"frame_size": F})], context, data)
    return stored, sysmeta


def view(context, stored: bytes, sysmeta):
    return SPEC.open_view(BytesSource(stored), sysmeta, context)


@pytest.mark.parametrize("size", [0, 1, F - 1, F, F + 1, 5 * F + 3])
def test_stored_length_is_computable_and_plaintext_is_hidden(context, size):
    data = b"A" * size
    stored, sysmeta = put(context, data)
    assert len(stored) == encryption.stored_length(size, F)
    assert len(stored) == size + 16 * max(1, -(-size // F))
    if size >= 32:
        assert b"A" * 32 not in stored
    assert view(context, stored, sysmeta).length == size
    assert set(sysmeta) == {"v", "alg", "frame", "salt", "len"}


def test_sysmeta_holds_no_key_material(context, key_provider):
    _, sysmeta = put(context, b"secret")
    text = "".join(sysmeta.values())
    assert key_provider.tenant_key("AUTH_t1").hex() not in text


def test_each_object_gets_its_own_salt_and_ciphertext(context):
    data = os.urandom(3 * F)
    first, meta1 = put(context, data)
    second, meta2 = put(context, data)
    assert meta1["salt"] != meta2["salt"]
    assert first[:BLOCK] != second[:BLOCK]


def test_range_read_decrypts_only_the_frames_it_needs(context):
    data = os.urandom(10 * F)
    stored, sysmeta = put(context, data)
    lower = CountingSource(BytesSource(stored))
    v = SPEC.open_view(lower, sysmeta, context)
    assert v.length == len(data) and lower.reads == []
    assert read_all(v, 3 * F + 5, 4 * F + 7) == data[3 * F + 5 : 4 * F + 7]
    assert lower.reads == [(3 * BLOCK, 5 * BLOCK)]
    assert read_all(v, len(data) - 1, len(data)) == data[-1:]
    assert lower.reads[-1] == (9 * BLOCK, 10 * BLOCK)


def flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x80]) + data[position + 1 :]


def test_a_flipped_bit_is_detected_in_its_frame_only(context):
    data = os.urandom(4 * F)
    stored, sysmeta = put(context, data)
    damaged = view(context, flip(stored, 2 * BLOCK + 10), sysmeta)
    with pytest.raises(IntegrityError, match="frame 2 fails authentication"):
        read_all(damaged)
    assert read_all(damaged, 0, 2 * F) == data[: 2 * F]  # untouched frames still read


def test_reordered_frames_are_detected(context):
    stored, sysmeta = put(context, os.urandom(4 * F))
    swapped = stored[BLOCK : 2 * BLOCK] + stored[:BLOCK] + stored[2 * BLOCK :]
    with pytest.raises(IntegrityError, match="frame 0"):
        read_all(view(context, swapped, sysmeta), 0, 1)


def test_a_frame_from_another_object_is_detected(context):
    stored, sysmeta = put(context, os.urandom(4 * F))
    other, _ = put(context, os.urandom(4 * F))
    spliced = stored[:BLOCK] + other[BLOCK : 2 * BLOCK] + stored[2 * BLOCK :]
    with pytest.raises(IntegrityError, match="frame 1"):
        read_all(view(context, spliced, sysmeta), F, F + 1)


def test_truncation_is_detected_even_with_forged_sysmeta(context):
    data = os.urandom(4 * F)
    stored, sysmeta = put(context, data)
    truncated = stored[: 3 * BLOCK]
    with pytest.raises(IntegrityError, match="truncated or extended"):
        view(context, truncated, sysmeta)
    # An attacker who also rewrites the recorded length still fails on the last frame.
    forged = view(context, truncated, sysmeta | {"len": str(3 * F)})
    with pytest.raises(IntegrityError, match="frame 2"):
        read_all(forged)


def test_a_length_that_is_not_made_of_frames_is_detected(context):
    stored, sysmeta = put(context, os.urandom(2 * F))
    for bad in (stored + b"x" * 16, stored[:10], b""):
        with pytest.raises(IntegrityError):
            view(context, bad, sysmeta | {"len": "0"})


def test_another_tenant_cannot_read(context, key_provider):
    data = os.urandom(100)
    stored, sysmeta = put(context, data)
    intruder = FilterContext("AUTH_t2", "logs", "day1.log", keys=key_provider)
    with pytest.raises(IntegrityError, match="another tenant"):
        read_all(view(intruder, stored, sysmeta))


def test_another_root_secret_cannot_read(context, tmp_path):
    stored, sysmeta = put(context, b"hello")
    create_key_file(tmp_path / "other.key")
    other = FilterContext("AUTH_t1", keys=KeyFileProvider(tmp_path / "other.key"))
    with pytest.raises(IntegrityError):
        read_all(view(other, stored, sysmeta))


def test_server_side_copy_within_the_account_stays_readable(context):
    data = os.urandom(2 * F + 1)
    stored, sysmeta = put(context, data)
    copy = FilterContext("AUTH_t1", "backup", "copy.log", keys=context.keys)
    assert read_all(view(copy, stored, sysmeta)) == data


@pytest.mark.parametrize(
    "change",
    [{"salt": "00"}, {"salt": "zz" * 16}, {"alg": "AES-128-CBC"}, {"frame": "many"},
     {"frame": "0"}, {"frame": str(2 * F)}],
)
def test_damaged_sysmeta_is_an_integrity_error(context, change):
    stored, sysmeta = put(context, os.urandom(3 * F))
    with pytest.raises(IntegrityError):
        read_all(view(context, stored, sysmeta | change))


def test_missing_key_provider_is_a_config_error():
    bare = FilterContext("AUTH_t1", "c", "o")
    with pytest.raises(ConfigError, match="key_file"):
        SPEC.encoder({}, bare)


@pytest.mark.parametrize(
    ("params", "message"),
    [({"frame_size": 100}, "below the minimum"), ({"frame_size": 1 << 30}, "above the maximum"),
     ({"key": "hunter2"}, "unknown parameter")],
)
def test_bad_parameters(context, params, message):
    with pytest.raises(ParamError, match=message):
        SPEC.encoder(params, context)


def _sealed_as_documented(context, data: bytes, frame_size: int, salt: bytes) -> bytes:
    """The stored layout of the module docstring, built without the filter's code."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from iostack.filters.tenant_keys import hkdf

    tenant_key = context.keys.tenant_key(context.account)
    aead = AESGCM(hkdf(tenant_key, b"iostack/encryption/v1/object", salt=salt))
    aad = b"IOSENC01" + frame_size.to_bytes(4, "big")
    frames = [data[i:i + frame_size] for i in range(0, len(data), frame_size)] or [b""]
    return b"".join(
        aead.encrypt(n.to_bytes(8, "big") + (n == len(frames) - 1).to_bytes(4, "big"), frame, aad)
        for n, frame in enumerate(frames))


@pytest.mark.parametrize("frame_size", [64 * KIB, 256 * KIB])
def test_objects_stored_with_either_default_frame_size_decode(context, frame_size):
    # 64 KiB was the default before 256 KiB: those objects must stay readable,
    # whole and by range, and still fail closed when tampered with.
    data = os.urandom(3 * frame_size + 5)
    salt = os.urandom(encryption.SALT_BYTES)
    stored = _sealed_as_documented(context, data, frame_size, salt)
    sysmeta = {"v": "1", "alg": "AES-256-GCM", "frame": str(frame_size), "salt": salt.hex(),
               "len": str(len(data))}
    plain = view(context, stored, sysmeta)
    assert read_all(plain) == data
    assert read_all(plain, frame_size - 3, 2 * frame_size + 7) == data[frame_size - 3:
                                                                         2 * frame_size + 7]
    flipped = bytearray(stored)
    flipped[frame_size + 100] ^= 1
    with pytest.raises(IntegrityError, match="frame 1 fails"):
        read_all(view(context, bytes(flipped), sysmeta))


def test_the_default_frame_size_writes_the_documented_layout(context):
    data = os.urandom(600 * KIB)
    stored, (sysmeta,) = store_chain([(SPEC, {})], context, data)
    assert sysmeta["frame"] == str(256 * KIB)
    salt = bytes.fromhex(sysmeta["salt"])
    assert stored == _sealed_as_documented(context, data, 256 * KIB, salt)


@pytest.mark.parametrize("chunk_size", [1, 7, BLOCK - 1, BLOCK + 9, 64 * KIB])
def test_frames_decode_however_the_stored_bytes_arrive_cut(context, chunk_size):
    """The view decrypts a frame in the pieces the stored stream brings, tag included."""
    data = os.urandom(3 * F + 5)
    stored, sysmeta = put(context, data)
    v = SPEC.open_view(BytesSource(stored, chunk_size=chunk_size), sysmeta, context)
    assert read_all(v) == data
    assert read_all(v, F - 3, 2 * F + 1) == data[F - 3 : 2 * F + 1]
    # A flipped bit in a tag cut across pieces is caught like any other.
    damaged = SPEC.open_view(BytesSource(flip(stored, 2 * BLOCK - 3), chunk_size=chunk_size),
                             sysmeta, context)
    with pytest.raises(IntegrityError, match="frame 1 fails authentication"):
        read_all(damaged)
