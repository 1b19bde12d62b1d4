"""CPU-heavy filter work off the eventlet hub, in batches that pay for the hand-off.

Swift's servers serve every request of a worker from one eventlet hub. A
filter that compresses or encrypts inline holds that hub for all of its CPU
time: one tenant's 10 MiB zstd PUT stalls every other request on the worker.
zlib, zstandard and OpenSSL (through ``cryptography``) release the GIL while
they work, so running them in a native thread (eventlet's ``tpool``) lets the
hub go on serving, and lets two PUTs on one worker use two cores.

A hand-off costs a pipe write and a hub wake-up (tens of microseconds on an
idle machine, more on a loaded one), more than AES-GCM spends on one 64 KiB
frame. So filters hand off *batches*: ``Offload.map`` groups a stream's frames
until they hold ``batch_bytes`` (default 1 MiB) and sends a batch to a
thread only when it is that big; the short tail of a body, and
small objects, are worked inline where a hand-off would cost more than it
frees. A batch is one call: each request has at most one batch in a thread
at a time, so the work queued is bounded by the requests in flight, and the
pool (``tpool``'s, ``EVENTLET_THREADPOOL_SIZE`` threads, 20 by default)
bounds the threads.

Outside an eventlet hub (the CLI, the sandbox runner, unit tests) everything
runs inline: there is no hub to keep free.

Config (``[filter:iostack]`` in the proxy and object server)
    filter_threads   ``true`` (default) or ``false``: ``false`` keeps all
                     filter work on the hub (for a server with many workers
                     per core, or to measure the difference:
                     ``bench/event_loop.py``)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

KIB = 1024
BATCH_BYTES = 1024 * KIB

Item = TypeVar("Item")
Result = TypeVar("Result")


class Offload:
    """Where a filter's batches run: in a native thread, or inline (``threads=False``)."""

    def __init__(self, threads: bool = True, batch_bytes: int = BATCH_BYTES) -> None:
        self.threads = threads
        self.batch_bytes = batch_bytes

    def map(self, work: Callable[[list[Item]], list[Result]], items: Iterable[Item],
            weight: Callable[[Item], int]) -> Iterator[Result]:
        """``work`` over ``items`` in order, a batch at a time; yields its results.

        ``items`` are pulled on the caller's (hub) thread, so they may come from
        a socket; a batch closes once its items ``weight`` ``batch_bytes``
        (what ``work`` will hold: for a decoder, the decoded size), and only
        such a batch goes to a thread. Off a hub, or inline, each item is its own
        batch, so the stream holds no more than it did without batches.
        """
        if not (self.threads and _on_a_hub()):
            for item in items:  # nothing to amortise: stream item by item
                yield from work([item])
            return
        batch: list[Item] = []
        held = 0
        for item in items:
            batch.append(item)
            held += weight(item)
            if held >= self.batch_bytes:
                yield from self._run(work, batch, held)
                batch, held = [], 0
        if batch:
            yield from self._run(work, batch, held)

    def _run(self, work: Callable[[list[Item]], list[Result]], batch: list[Item],
             held: int) -> list[Result]:
        if held >= self.batch_bytes:
            from eventlet import tpool

            return tpool.execute(work, batch)
        return work(batch)

    def __repr__(self) -> str:
        where = "threads" if self.threads else "inline"
        return f"Offload({where}, batch {self.batch_bytes} B)"


INLINE = Offload(threads=False)


def _on_a_hub() -> bool:
    """Whether this process serves requests from an eventlet hub (Swift's servers
    monkey-patch threads). Filters never import eventlet themselves: the sandbox
    runner and the CLI would pay for it at every start."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and patcher.is_monkey_patched("thread")


def offload_from_conf(conf: Mapping[str, str]) -> Offload:
    """The middleware's ``Offload``, from its ``filter_threads`` setting."""
    from swift.common.utils import config_true_value

    return Offload(threads=config_true_value(conf.get("filter_threads", "true")))
