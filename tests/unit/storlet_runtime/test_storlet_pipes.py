"""Pieces crossing the pipes between a server and a storlet."""

from __future__ import annotations

import fcntl
import os

from iostack.storlet_runtime.pipes import PIPE_PIECE, joined, widen


def test_small_chunks_are_joined_into_pieces_of_at_least_the_size():
    chunks = [bytes([n]) * 300 for n in range(10)]  # 3000 bytes
    pieces = list(joined(chunks, 1000))
    assert [len(p) for p in pieces] == [1200, 1200, 600]
    assert b"".join(pieces) == b"".join(chunks)


def test_large_chunks_and_nothing_pass_as_they_are():
    big = [b"a" * 5000, b"b" * 7000]
    assert list(joined(big, 1000)) == big
    assert list(joined([], 1000)) == []


def test_widen_makes_a_pipe_hold_a_piece_and_ignores_files(tmp_path):
    r, w = os.pipe()
    try:
        widen(w)
        assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) == PIPE_PIECE
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb") as f:
        widen(f.fileno())  # not a pipe: nothing happens, no error
