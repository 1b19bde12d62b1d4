"""Throughput, CPU and stored size of the native filters, against a plain copy.

    .venv/bin/python bench/filters.py [--size-mib 32] [--repeat 5] [--chunk-kib 64]

For each corpus (redundant log-like text, random bytes) and each filter
configuration (noop, gzip, zstd, encryption, zstd+encryption) it encodes the
body as a PUT would (chunks in, stored chunks out) and decodes it as a GET
would (a view over the stored bytes), timing both with wall and CPU clocks.
The baseline is a plain copy of every chunk, measured in the same run: each
repetition runs all configurations in turn, so noise from other work on the
machine hits them alike. It prints medians over the repetitions and ratios to
the copy, plus how far two threads scale (the C codecs release the GIL).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iostack.filters.base import ByteSource, BytesSource, FilterContext
from iostack.filters.library import get_filter
from iostack.filters.tenant_keys import KeyFileProvider, create_key_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import log_corpus, print_table, random_corpus

MIB = 1024 * 1024
RANGE_BYTES = 4096
RANGE_SAMPLES = 200

CONFIGS: dict[str, list[tuple[str, dict]]] = {
    "noop": [("noop", {})],
    "gzip": [("compression", {"algorithm": "gzip"})],
    "zstd": [("compression", {"algorithm": "zstd"})],
    "encryption": [("encryption", {})],
    "zstd+encryption": [("compression", {"algorithm": "zstd"}), ("encryption", {})],
}


class CopyEncoder:
    """The baseline: what a pass-through middleware does with every chunk."""

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            yield bytes(bytearray(chunk))


class CopyView:
    def __init__(self, stored: bytes, chunk: int) -> None:
        self._source = BytesSource(stored, chunk)
        self.length = self._source.length

    def read(self, start: int, end: int) -> Iterator[bytes]:
        for chunk in self._source.read(start, end):
            yield bytes(bytearray(chunk))


def chunks_of(data: bytes, size: int) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield bytes(view[i : i + size])


def timed(work: Callable[[], int]) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    produced = work()
    return time.perf_counter() - wall, time.process_time() - cpu, produced


def encoders_for(name: str, context: FilterContext) -> list:
    return [get_filter(f).encoder(p, context) for f, p in CONFIGS.get(name, [])]


def encode_stream(name: str, encoders: list, chunks: Iterable[bytes]) -> Iterable[bytes]:
    if name == "copy":
        return CopyEncoder().encode(chunks)
    for encoder in encoders:
        chunks = encoder.encode(chunks)
    return chunks


def open_views(name: str, lower: ByteSource, sysmetas: list[dict[str, str]],
               context: FilterContext) -> ByteSource:
    view = lower
    for (f, _), sysmeta in reversed(list(zip(CONFIGS.get(name, []), sysmetas, strict=True))):
        view = get_filter(f).open_view(view, sysmeta, context)
    return view


def run_once(name: str, data: bytes, chunk: int, context: FilterContext) -> dict[str, float]:
    stored_chunks: list[bytes] = []
    encoders = encoders_for(name, context)

    def encode() -> int:
        stored_chunks.extend(encode_stream(name, encoders, chunks_of(data, chunk)))
        return sum(map(len, stored_chunks))

    enc_wall, enc_cpu, stored_length = timed(encode)
    stored = b"".join(stored_chunks)
    sysmetas = [encoder.sysmeta() for encoder in encoders]

    def decode() -> int:
        lower = CopyView(stored, chunk) if name == "copy" else BytesSource(stored, chunk)
        view = open_views(name, lower, sysmetas, context)
        return sum(len(piece) for piece in view.read(0, view.length))

    dec_wall, dec_cpu, decoded = timed(decode)
    assert decoded == len(data), f"{name}: decoded {decoded} of {len(data)} bytes"  # noqa: S101 - a wrong result voids the run
    return {"enc_wall": enc_wall, "enc_cpu": enc_cpu, "dec_wall": dec_wall, "dec_cpu": dec_cpu,
            "ratio": stored_length / len(data)}


class CountingSource:
    """Counts the stored bytes a view fetches."""

    def __init__(self, lower: ByteSource) -> None:
        self._lower = lower
        self.length = lower.length
        self.fetched = 0

    def read(self, start: int, end: int) -> Iterator[bytes]:
        self.fetched += end - start
        return self._lower.read(start, end)


def range_reads(name: str, data: bytes, context: FilterContext, ranges: list[tuple[int, int]]
                ) -> tuple[float, float]:
    """Median µs per range GET (view opened per request) and mean stored bytes fetched."""
    encoders = encoders_for(name, context)
    stored = b"".join(encode_stream(name, encoders, chunks_of(data, 64 * 1024)))
    sysmetas = [encoder.sysmeta() for encoder in encoders]
    latencies, fetched = [], 0
    for start, end in ranges:
        lower = CountingSource(BytesSource(stored))
        began = time.perf_counter()
        view = open_views(name, lower, sysmetas, context)
        got = b"".join(view.read(start, end))
        latencies.append(time.perf_counter() - began)
        assert got == data[start:end], f"{name}: wrong bytes for range {start}-{end}"  # noqa: S101 - a wrong result voids the run
        fetched += lower.fetched
    return statistics.median(latencies) * 1e6, fetched / len(ranges)


def thread_scaling(work: Callable[[], object]) -> float:
    """Throughput of ``work`` run by two threads at once, over one thread's."""
    start = time.perf_counter()
    work()
    # Repeat short work so each measurement lasts long enough to mean something.
    rounds = max(1, int(0.3 / (time.perf_counter() - start)))

    def batch() -> None:
        for _ in range(rounds):
            work()

    start = time.perf_counter()
    batch()
    single = time.perf_counter() - start
    threads = [threading.Thread(target=batch) for _ in range(2)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 2 * single / (time.perf_counter() - start)


def hash_reference(data: bytes) -> None:
    """Work that surely releases the GIL, to tell GIL limits from a busy machine."""
    for _ in range(4):
        hashlib.sha256(data).digest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=32, help="body size (default 32)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--chunk-kib", type=int, default=64,
                        help="chunk size on the wire, as Swift's proxy uses (default 64)")
    args = parser.parse_args(argv)
    size, chunk = args.size_mib * MIB, args.chunk_kib * 1024

    with tempfile.TemporaryDirectory() as tmp:
        create_key_file(os.path.join(tmp, "root.key"))
        context = FilterContext("AUTH_bench", "c", "o",
                                keys=KeyFileProvider(os.path.join(tmp, "root.key")))
        names = ["copy", *CONFIGS]
        print(f"body {args.size_mib} MiB, chunks {args.chunk_kib} KiB, {args.repeat} repetitions,"
              f" medians; 'x copy' = throughput relative to a plain copy in the same run")
        rows = []
        for corpus, make in (("logs", log_corpus), ("random", random_corpus)):
            data = make(size)
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
            for repetition in range(args.repeat + 1):
                for name in names:
                    result = run_once(name, data, chunk, context)
                    if repetition:  # the first round only warms caches and allocators
                        runs[name].append(result)
            med = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
                   for name, rs in runs.items()}
            gb = size / 1e9
            copy = med["copy"]
            for name in names:
                m = med[name]
                rows.append([corpus, name, size / 1e6 / m["enc_wall"],
                             f"{copy['enc_wall'] / m['enc_wall']:.3f}", size / 1e6 / m["dec_wall"],
                             f"{copy['dec_wall'] / m['dec_wall']:.3f}", f"{m['ratio']:.4f}",
                             m["enc_cpu"] / gb, m["dec_cpu"] / gb])
        print_table(["corpus", "filter", "enc MB/s", "x copy", "dec MB/s", "x copy",
                     "stored/orig", "enc CPU s/GB", "dec CPU s/GB"], rows)
        rng = random.Random(3)
        starts = [rng.randrange(size - RANGE_BYTES) for _ in range(RANGE_SAMPLES)]
        ranges = [(start, start + RANGE_BYTES) for start in starts]
        print(f"\n{RANGE_SAMPLES} random {RANGE_BYTES // 1024} KiB range GETs (view opened per "
              f"request), medians; 'x copy' = relative to reading the plain bytes")
        rows = []
        for corpus, make in (("logs", log_corpus), ("random", random_corpus)):
            data = make(size)
            results = {name: range_reads(name, data, context, ranges)
                       for name in ("copy", "zstd", "encryption", "zstd+encryption")}
            for name, (micros, fetched) in results.items():
                rows.append([corpus, name, micros, micros / results["copy"][0], fetched / 1024])
        print_table(["corpus", "filter", "µs/range", "x copy", "stored KiB read"], rows)
        print()
        scale_data = log_corpus(min(size, 16 * MIB))
        scaling = {name: statistics.median(
            thread_scaling(lambda n=name: run_once(n, scale_data, chunk, context))
            for _ in range(args.repeat)) for name in ("gzip", "zstd", "encryption")}
        scaling["sha256 reference"] = statistics.median(
            thread_scaling(lambda: hash_reference(scale_data)) for _ in range(args.repeat))
        print("two threads vs one (logs, encode+decode; 2.0 = perfect on 2 idle cores): "
              + ", ".join(f"{name} {value:.2f}x" for name, value in scaling.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
