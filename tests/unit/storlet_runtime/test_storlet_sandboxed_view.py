"""What the proxy's sandboxed view asks the sandbox for (a fake runner; the real one is in
tests/integration/storlet_runtime/test_storlet_datapath.py)."""

from __future__ import annotations

import json

from iostack.filters.base import FilterContext
from iostack.swift_middleware.enforce.sandboxed import SandboxedView

STORED = b"stored form " * 100
DECODED = bytes(range(256)) * 4


class BytesSource:
    length = len(STORED)

    def read(self, start: int, end: int):
        yield STORED[start:end]


class RecordingRunner:
    def __init__(self) -> None:
        self.params: dict[str, str] = {}

    def run(self, account, storlet, params, data_iter, metadata=None, code_sha256=None):
        self.params = params
        assert b"".join(data_iter) == STORED
        start, end = map(int, params["range"].split("-"))
        return {}, iter([DECODED[start:end]])


def test_a_read_streams_the_stored_bytes_and_says_how_many():
    runner = RecordingRunner()
    sysmeta = {"iostack.runtime": "storlet", "iostack.storlet": "iostack_custom.py",
               "iostack.length": str(len(DECODED)), "level": "6"}
    view = SandboxedView(runner, BytesSource(), sysmeta, FilterContext(account="AUTH_t1"))
    assert b"".join(view.read(10, 300)) == DECODED[10:300]
    # The sandbox can decode as the bytes arrive instead of spooling them all first.
    assert runner.params["length"] == str(len(STORED))
    assert runner.params["range"] == "10-300" and runner.params["mode"] == "decode"
    assert json.loads(runner.params["sysmeta"]) == {"level": "6"}
