"""One ``PolicyReader`` per worker process, shared by the IOStack middlewares in it.

Every middleware that needs policies (enforcement, caching) asks
``shared_reader`` with its config; those pointing at the same Redis and key
prefix share one reader, hence one cache and one pub/sub subscription. It is
created on first use, in the worker: Swift forks workers after loading the
pipeline, and the reader's listener thread must live in the worker.

Config options read here: ``redis_url``, ``key_prefix``,
``policy_cache_size`` (10000), ``policy_cache_max_age`` (30 s).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from iostack.policy.reader import PolicyReader

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX = "iostack:"

_readers: dict[tuple[int, str, str], PolicyReader] = {}
_lock = threading.Lock()


def reader_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """The reader's settings from a middleware config, parsed once at start-up."""
    return {
        "redis_url": conf.get("redis_url", DEFAULT_REDIS_URL),
        "prefix": conf.get("key_prefix", DEFAULT_PREFIX),
        "cache_size": int(conf.get("policy_cache_size", 10000)),
        "max_age": float(conf.get("policy_cache_max_age", 30)),
    }


def shared_reader(settings: dict[str, Any]) -> PolicyReader:
    key = (os.getpid(), settings["redis_url"], settings["prefix"])
    with _lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = PolicyReader(**settings)
        return reader
