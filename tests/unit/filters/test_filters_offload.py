"""Filter work off the eventlet hub: batches run in native threads, results as inline."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from filters_testlib import encode, log_text, view_of

from iostack.filters.base import FilterContext, read_all
from iostack.filters.errors import IntegrityError
from iostack.filters.library import get_filter
from iostack.filters.offload import Offload

KIB = 1024

# Runs in a child: monkey-patching eventlet must not leak into the other tests.
ON_A_HUB = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import json, sys
    from iostack.filters.base import FilterContext, read_all, BytesSource
    from iostack.filters.library import get_filter
    from iostack.filters.offload import Offload
    from iostack.filters.tenant_keys import KeyFileProvider

    data = bytes.fromhex(sys.stdin.read())
    keys = KeyFileProvider(sys.argv[1])
    ticks = []

    def ticker():
        while True:
            ticks.append(1)
            eventlet.sleep(0.001)

    def run(threads, name, params):
        context = FilterContext("AUTH_t1", "c", "o", keys=keys, offload=Offload(threads))
        spec = get_filter(name)
        encoder = spec.encoder(params, context)
        del ticks[:]
        stored = b"".join(encoder.encode([data[i:i + 65536]
                                          for i in range(0, len(data), 65536)]))
        during_put = len(ticks)
        view = spec.open_view(BytesSource(stored), encoder.sysmeta(), context)
        return {"ticks": during_put, "stored": stored.hex(), "sysmeta": encoder.sysmeta(),
                "back": read_all(view) == data}

    eventlet.spawn(ticker)
    eventlet.sleep(0.01)
    out = {}
    for name, params in (("compression", {"algorithm": "gzip", "level": 9,
                                          "frame_size": 262144}),
                         ("encryption", {"frame_size": 65536})):
        out[name] = {"threads": run(True, name, params), "inline": run(False, name, params)}
    print(json.dumps(out))
""")


def test_a_batch_in_a_thread_leaves_the_hub_serving_and_changes_no_byte(tmp_path, key_provider):
    """gzip -9 and AES-GCM of 6 MiB under a hub; a greenthread ticks every millisecond."""
    data = log_text(6 * 1024 * KIB, seed=3)
    key_file = tmp_path / "root.key"  # key_provider's
    done = subprocess.run([sys.executable, "-c", ON_A_HUB, str(key_file)], input=data.hex(),
                          capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(done.stdout)
    compression, encryption = out["compression"], out["encryption"]
    # Inline, the hub never runs while the body is encoded: no other request is served.
    assert compression["inline"]["ticks"] == 0
    # In threads, it goes on serving during the encoding.
    assert compression["threads"]["ticks"] > 0 and encryption["threads"]["ticks"] > 0
    for result in (compression, encryption):
        assert result["threads"]["back"] and result["inline"]["back"]
    # Compression is deterministic: threads change where it runs, not what it stores.
    assert compression["threads"]["stored"] == compression["inline"]["stored"]
    assert compression["threads"]["sysmeta"] == compression["inline"]["sysmeta"]


def test_off_a_hub_every_item_is_its_own_batch_in_order():
    calls: list[list[int]] = []

    def work(batch: list[int]) -> list[int]:
        calls.append(batch)
        return [item * 2 for item in batch]

    # Off a hub (this process), every item is its own batch: nothing is held back.
    assert list(Offload(threads=True, batch_bytes=10).map(work, range(7), lambda _: 4)) == [
        0, 2, 4, 6, 8, 10, 12]
    assert calls == [[n] for n in range(7)]


def test_an_integrity_error_in_a_batch_reaches_the_reader(context):
    spec = get_filter("encryption")
    data = log_text(300 * KIB, seed=5)
    stored, sysmeta = encode(spec, {"frame_size": 64 * KIB}, context, data)
    tampered = bytearray(stored)
    tampered[70 * KIB] ^= 1
    threaded = FilterContext(context.account, context.container, context.obj,
                             keys=context.keys, offload=Offload(threads=True))
    view = view_of(spec, bytes(tampered), sysmeta, threaded)
    with pytest.raises(IntegrityError, match="encrypted frame 1 fails"):
        read_all(view)
