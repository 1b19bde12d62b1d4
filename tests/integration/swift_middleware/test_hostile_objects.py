"""A hostile tenant object stops only its own GET: the all-in-one's one proxy worker (and
its object server) answer a deep JSON record, a line with no end and a Parquet file that
decodes to gigabytes with a 422 naming the limit, in bounded time, while 1 KiB GETs
sent meanwhile to the same worker keep answering: each in under a second, or, on a
machine so loaded that the same GET took longer just before, within 4 times that.

Before, the deep record killed the worker (SIGSEGV: the 1 KiB GETs failed), the line
was answered 200 after re-scanning all it held on every read, and the Parquet file was
decoded in the worker (1.5 GiB)."""

from __future__ import annotations

import io
import statistics
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from test_select_formats import http, select  # noqa: F401 - the fixture, for this module

pytestmark = pytest.mark.integration

SMALL = b"s" * 1024


def dictionary_bomb(rows: int) -> bytes:
    """A ~1 KB Parquet file whose one column decodes to 1 MiB a row."""
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()),
                                            pa.array(["x" * (1 << 20)]))
    out = io.BytesIO()
    pq.write_table(pa.table({"s": column}), out, store_schema=False, compression="zstd")
    return out.getvalue()


HOSTILE = {
    # pyarrow's JSON reader recursed once per level: 10,000 killed the worker (SIGSEGV).
    "deep.jsonl": (b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"\n",
                   select("json_select", columns="a"), "over the JSON depth limit (64)"),
    # 12 MiB with no newline: held whole, re-scanned on every read before.
    "line.log": (b"first\n" + b"x" * (12 << 20), select("grep", pattern="y"),
                 "the max_record limit (8388608 bytes)"),
    # 1.5 GiB decoded from ~1 KB: the footer's sizes are honest and small.
    "bomb.parquet": (dictionary_bomb(1536), select("parquet_select", columns="s"),
                     "more memory than the parquet_max_memory limit"),
}


@pytest.mark.parametrize("stage", ["proxy", "object"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_object_gets_422_while_the_worker_serves_others(t1, container, http,  # noqa: F811
                                                                  name, stage):
    body, headers, reason = HOSTILE[name]
    t1.put_object(container, name, body)
    t1.put_object(container, "small", SMALL)
    before = []
    for _ in range(5):  # also warms auth and the info caches
        sent = time.monotonic()
        assert http(f"{container}/small").content == SMALL
        before.append(time.monotonic() - sent)
    answer: list[requests.Response] = []
    started = time.monotonic()
    hostile = threading.Thread(target=lambda: answer.append(
        http(f"{container}/{name}", X_Iostack_Stage=stage, **headers)))
    hostile.start()
    latencies = []
    while hostile.is_alive() and time.monotonic() - started < 120:
        sent = time.monotonic()
        assert http(f"{container}/small").content == SMALL
        latencies.append(time.monotonic() - sent)
        time.sleep(0.05)
    hostile.join(timeout=120)
    took = time.monotonic() - started
    assert answer, f"no answer for {name} in {took:.0f} s"
    assert answer[0].status_code == 422, (answer[0].status_code, answer[0].text[-2000:])
    assert reason in answer[0].text and f"{container}/{name}" in answer[0].text
    assert latencies and max(latencies) < max(1.0, 4 * statistics.median(before)), (
        before, latencies)
    assert http(f"{container}/small").content == SMALL  # and the worker lives on
