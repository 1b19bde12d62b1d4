"""The storlet's input as a ``ByteSource``: an object file, or a pipe the proxy streams into."""

from __future__ import annotations

import os
import threading

import pytest

from iostack.storlet_runtime.filter_runner import FdSource

BODY = bytes(range(256)) * 12  # 3072 bytes


def test_with_a_known_length_reads_start_before_the_whole_body_arrived():
    r, w = os.pipe()
    first_read_done = threading.Event()

    def server():
        os.write(w, BODY[:1000])
        first_read_done.wait(5)  # without the reader's signal the rest comes anyway, late
        os.write(w, BODY[1000:])
        os.close(w)

    writer = threading.Thread(target=server)
    writer.start()
    try:
        source = FdSource(r, len(BODY))
        assert source.length == len(BODY)
        assert b"".join(source.read(0, 1000)) == BODY[:1000]
        assert not first_read_done.is_set()  # served from what had arrived
        first_read_done.set()
        assert b"".join(source.read(2000, 3072)) == BODY[2000:]
        assert b"".join(source.read(10, 20)) == BODY[10:20]  # back again: from the spool
    finally:
        first_read_done.set()
        writer.join()
        os.close(r)


def test_without_a_length_the_whole_body_is_spooled_first():
    r, w = os.pipe()
    os.write(w, BODY)
    os.close(w)
    source = FdSource(r)
    assert source.length == len(BODY)
    assert b"".join(source.read(100, 200)) == BODY[100:200]
    os.close(r)


def test_drain_reads_what_the_server_still_sends():
    big = os.urandom(3 << 20)  # more than any pipe holds: the writer blocks unless read
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, big), os.close(w)))
    writer.start()
    source = FdSource(r, len(big))
    assert b"".join(source.read(0, 10)) == big[:10]
    source.drain()
    writer.join(5)
    assert not writer.is_alive()
    os.close(r)


def test_a_body_shorter_than_announced_is_an_error():
    r, w = os.pipe()
    os.write(w, BODY[:100])
    os.close(w)
    source = FdSource(r, len(BODY))
    with pytest.raises(ValueError, match="ended at 100"):
        b"".join(source.read(0, 200))
    os.close(r)


def test_an_object_file_is_read_in_place(tmp_path):
    path = tmp_path / "obj"
    path.write_bytes(BODY)
    fd = os.open(path, os.O_RDONLY)
    try:
        source = FdSource(fd, 5)  # a file knows its length; the parameter is not needed
        assert source.length == len(BODY)
        assert b"".join(source.read(3000, 3072)) == BODY[3000:]
        source.drain()  # nothing to drain
    finally:
        os.close(fd)
