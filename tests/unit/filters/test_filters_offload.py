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
        # Every full batch to a thread, however cheap (AES-GCM with VAES would run
        # inline after the first): this is about what a batch in a thread does.
        context = FilterContext("AUTH_t1", "c", "o", keys=keys,
                                offload=Offload(threads, handoff_seconds=0))
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


# Runs in a child, as ON_A_HUB: where each batch ran (the OS thread), for a kind of
# work that costs next to nothing and one that costs milliseconds a batch.
WHERE_BATCHES_RUN = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import functools, hashlib, json
    from eventlet import patcher
    from iostack.filters.offload import Offload

    os_thread = patcher.original("_thread").get_ident
    hub = os_thread()

    def cheap(batch):
        return [item + 1 for item in batch]

    def costly(batch):
        digest = b""
        for _ in range(20000):  # several milliseconds of CPU
            digest = hashlib.sha256(digest).digest()
        return [item + 1 for item in batch]

    offload = Offload(threads=True, batch_bytes=4)
    out = {}
    for work in (cheap, costly):
        ran = []

        @functools.wraps(work)  # Offload knows a kind of work by its name
        def recorded(batch, work=work, ran=ran):
            ran.append("hub" if os_thread() == hub else "thread")
            return work(batch)

        out[work.__name__] = {"results": list(offload.map(recorded, range(9), lambda _: 1)),
                              "ran": ran}
    print(json.dumps(out))
""")


def test_only_work_that_costs_more_than_a_hand_off_leaves_the_hub():
    done = subprocess.run([sys.executable, "-c", WHERE_BATCHES_RUN], capture_output=True,
                          text=True, timeout=120, check=True)
    out = json.loads(done.stdout)
    for kind in ("cheap", "costly"):
        assert out[kind]["results"] == list(range(1, 10))  # in order, each item once
    # Batches of four: the first goes to a thread (nothing measured yet). Then
    # cheap work streams on the hub item by item; costly work goes on in
    # batches, in threads, and only its one-item tail stays on the hub.
    assert out["cheap"]["ran"] == ["thread"] + ["hub"] * 5
    assert out["costly"]["ran"] == ["thread", "thread", "hub"]


def test_the_hand_off_threshold_comes_from_the_config():
    from iostack.filters.offload import HANDOFF_SECONDS, offload_from_conf

    assert offload_from_conf({}).handoff_seconds == HANDOFF_SECONDS
    assert offload_from_conf({"filter_thread_min_us": "0"}).handoff_seconds == 0
    assert offload_from_conf({"filter_thread_min_us": "500"}).handoff_seconds == 0.0005
    assert not offload_from_conf({"filter_threads": "false"}).threads
    for bad in ("-1", "fast", "2000000"):
        with pytest.raises(ValueError, match=f"filter_thread_min_us .*{bad!r}"):
            offload_from_conf({"filter_thread_min_us": bad})
