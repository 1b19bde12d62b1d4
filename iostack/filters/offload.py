"""CPU-heavy filter work off the eventlet hub, in batches that pay for the hand-off.

Swift's servers serve every request of a worker from one eventlet hub. A
filter that compresses or encrypts inline holds that hub for all of its CPU
time: one tenant's 10 MiB zstd PUT stalls every other request on the worker.
zlib, zstandard and OpenSSL (through ``cryptography``) release the GIL while
they work, so running them in a native thread (eventlet's ``tpool``) lets the
hub go on serving, and lets two PUTs on one worker use two cores.

A hand-off costs a pipe write and a hub wake-up (tens of microseconds on an
idle machine, 120-200 µs of CPU on a loaded one). So filters hand off
*batches*: ``Offload.map`` groups a stream's frames until they hold
``batch_bytes`` (default 1 MiB) and sends a batch to a thread only when it
is that big; the short tail of a body, and small objects, are worked inline
where a hand-off would cost more than it frees. A batch is one call: each
request has at most one batch in a thread at a time, so the work queued is
bounded by the requests in flight, and the pool (``tpool``'s,
``EVENTLET_THREADPOOL_SIZE`` threads, 20 by default) bounds the threads.

And only work worth a hand-off leaves the hub: ``Offload`` times the work
of each kind (CPU time of the thread that ran it, per byte, over its recent
batches) and, once a full batch of it would take less than a hand-off
(``HANDOFF_SECONDS``), runs it inline, item by item, as with threads off.
What is cheap depends on the CPU: with VAES, AES-GCM seals or opens 1 MiB
in about 60 µs, less than handing it to a thread costs; zstd, gzip and
AES-GCM without VAES cost several times more, and go to threads. Until a
kind of work has been timed, its full batches go to threads.

Outside an eventlet hub (the CLI, the sandbox runner, unit tests) everything
runs inline: there is no hub to keep free.

Config (``[filter:iostack]`` in the proxy and object server)
    filter_threads   ``true`` (default) or ``false``: ``false`` keeps all
                     filter work on the hub (for a server with many workers
                     per core, or to measure the difference:
                     ``bench/event_loop.py``)
    filter_thread_min_us
                     ``200`` (default): a full batch goes to a thread only if
                     its kind of work has cost at least this many µs of CPU
                     per batch (``HANDOFF_SECONDS``); ``0`` hands every full
                     batch to a thread
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

KIB = 1024
BATCH_BYTES = 1024 * KIB
HANDOFF_SECONDS = 200e-6  # what a hand-off costs the hub on a loaded machine (CPU)
_DECAY = 0.9  # what a batch's cost still weighs one batch later

Item = TypeVar("Item")
Result = TypeVar("Result")


class Offload:
    """Where a filter's batches run: in a native thread, or inline (``threads=False``)."""

    def __init__(self, threads: bool = True, batch_bytes: int = BATCH_BYTES,
                 handoff_seconds: float = HANDOFF_SECONDS) -> None:
        self.threads = threads
        self.batch_bytes = batch_bytes
        self.handoff_seconds = handoff_seconds
        self.costs: dict[str, WorkCost] = {}  # by kind of work (its qualified name)

    def map(self, work: Callable[[list[Item]], list[Result]], items: Iterable[Item],
            weight: Callable[[Item], int]) -> Iterator[Result]:
        """``work`` over ``items`` in order, a batch at a time; yields its results.

        ``items`` are pulled on the caller's (hub) thread, so they may come from
        a socket; a batch closes once its items ``weight`` ``batch_bytes``
        (what ``work`` will hold: for a decoder, the decoded size), and only
        such a batch goes to a thread. Work whose batches have cost less than
        a hand-off so far, like all work off a hub or inline, runs item by item
        as it comes: the stream holds no more than it did without batches.
        """
        if not (self.threads and _on_a_hub()):
            for item in items:  # nothing to amortise: stream item by item
                yield from work([item])
            return
        cost = self.costs.setdefault(work.__qualname__, WorkCost())
        batch: list[Item] = []
        held = 0
        for item in items:
            batch.append(item)
            held += weight(item)
            if cost.known() and cost.of(self.batch_bytes) < self.handoff_seconds:
                # Cheaper than a hand-off: streamed inline, as with threads off.
                yield from cost.run(work, batch, held)
                batch, held = [], 0
            elif held >= self.batch_bytes:
                yield from cost.run(work, batch, held, thread=True)
                batch, held = [], 0
        if batch:
            yield from cost.run(work, batch, held)

    def __repr__(self) -> str:
        where = "threads" if self.threads else "inline"
        return f"Offload({where}, batch {self.batch_bytes} B)"


INLINE = Offload(threads=False)


class WorkCost:
    """What one kind of work has cost per byte: CPU seconds over bytes weighed, of
    its recent batches (each sum decays by ``_DECAY`` per batch), so a short tail
    barely moves it."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.bytes = 0.0

    def known(self) -> bool:
        return self.bytes > 0

    def of(self, size: int) -> float:
        return self.seconds / self.bytes * size

    def run(self, work: Callable[[list[Item]], list[Result]], batch: list[Item], held: int,
            thread: bool = False) -> list[Result]:
        """``work(batch)`` inline or in a native thread, timed (CPU of the thread
        that ran it)."""
        if thread:
            from eventlet import tpool

            results, seconds = tpool.execute(_timed, work, batch)
        else:
            results, seconds = _timed(work, batch)
        self.seconds = self.seconds * _DECAY + seconds
        self.bytes = self.bytes * _DECAY + held
        return results


def _timed(work: Callable[[list[Item]], list[Result]],
           batch: list[Item]) -> tuple[list[Result], float]:
    """``work(batch)`` and the CPU seconds it took this thread."""
    started = time.thread_time()
    results = work(batch)
    return results, time.thread_time() - started


def _on_a_hub() -> bool:
    """Whether this process serves requests from an eventlet hub (Swift's servers
    monkey-patch threads). Filters never import eventlet themselves: the sandbox
    runner and the CLI would pay for it at every start."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and patcher.is_monkey_patched("thread")


def offload_from_conf(conf: Mapping[str, str]) -> Offload:
    """The middleware's ``Offload``, from its ``filter_threads`` and
    ``filter_thread_min_us`` settings."""
    from swift.common.utils import config_true_value

    min_us = conf.get("filter_thread_min_us", HANDOFF_SECONDS * 1e6)
    try:
        handoff_seconds = float(min_us) / 1e6
    except ValueError:
        handoff_seconds = -1.0
    if not 0 <= handoff_seconds <= 1:
        raise ValueError(f"filter_thread_min_us must be microseconds in [0, 1000000], "
                         f"not {min_us!r}")
    return Offload(threads=config_true_value(conf.get("filter_threads", "true")),
                   handoff_seconds=handoff_seconds)
