"""One ``PolicyReader`` per worker process, shared by the IOStack middlewares in it.

Every middleware that needs policies (enforcement, caching) asks
``shared_reader`` with its config; those pointing at the same Redis and key
prefix share one reader, hence one copy of the policy state and one pub/sub
subscription. It is created on first use, in the worker: Swift forks workers
after loading the pipeline, and the reader's threads must live in the worker.

Config options read here: ``redis_url``, ``key_prefix``, ``policy_snapshot``
(the node's copy of the policy state, shared by its workers; by default
``/var/lib/iostack/policy-<digest>.json``, the digest naming the store's
address and prefix, so two stacks on one host never share a copy; the
directory must be writable by the proxy's user) and ``policy_poll_interval``
(1 s). See ``iostack.policy.reader``. In a worker that eventlet patched
(Swift's), the reader writes its copy through eventlet's thread pool.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from eventlet import patcher, tpool

from iostack.policy.reader import PolicyReader

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX = "iostack:"
SNAPSHOT_DIR = "/var/lib/iostack"

_readers: dict[tuple[int, str, str], PolicyReader] = {}
_lock = threading.Lock()


def reader_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """The reader's settings from a middleware config, parsed once at start-up."""
    url = conf.get("redis_url", DEFAULT_REDIS_URL)
    prefix = conf.get("key_prefix", DEFAULT_PREFIX)
    return {
        "redis_url": url,
        "prefix": prefix,
        "snapshot": conf.get("policy_snapshot") or default_snapshot(url, prefix),
        "poll_interval": float(conf.get("policy_poll_interval", 1)),
        # The proxy this worker belongs to, as its metrics name it (``policy status``).
        "node": f"{conf.get('bind_ip', '0.0.0.0')}:{conf.get('bind_port', '')}",  # noqa: S104
    }


def default_snapshot(url: str, prefix: str) -> str:
    """``SNAPSHOT_DIR/policy-<digest>.json``, the digest of the store's address and prefix
    (credentials left out: a password change keeps the copy)."""
    parts = urlsplit(url)
    where = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    digest = hashlib.sha256(f"{where}\0{prefix}".encode()).hexdigest()[:16]
    return f"{SNAPSHOT_DIR}/policy-{digest}.json"


def shared_reader(settings: dict[str, Any]) -> PolicyReader:
    key = (os.getpid(), settings["redis_url"], settings["prefix"])
    with _lock:
        reader = _readers.get(key)
        if reader is None:
            green = patcher.is_monkey_patched("thread")
            reader = _readers[key] = PolicyReader(
                **settings, **({"offload": tpool.execute} if green else {}))
        return reader
