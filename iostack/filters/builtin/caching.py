"""``caching``: the policy that caches object heads on a proxy's fast directory.

As in the thesis on SSD caching for object storage, the cache keeps whole
small objects and the first ``head`` bytes of larger ones on flash: a GET is
answered from the cached head at once while the rest streams from the object
servers, hiding their access time. The cache itself (the store on disk, the
middleware that fills and serves it) lives in ``iostack.swift_middleware.cache``.

Config
    proxy: ``cache_dir`` (a fast local directory) and ``cache_size`` (bytes);
    the middleware builds one ``CacheStore`` per proxy worker on them.
    policy: ``head`` (default 4 MiB) — objects up to this size are cached
    whole, larger ones their first ``head`` bytes.
"""

from __future__ import annotations

from iostack.filters.base import FilterSpec
from iostack.filters.metadata import FilterMetadata, Param

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

METADATA = FilterMetadata(
    name="caching",
    description=(
        "Caches object heads on the proxy's fast directory (SSD): small objects whole, the "
        "first `head` bytes of larger ones, served while the rest streams from the object "
        "servers; LRU by bytes; invalidated on PUT/POST/DELETE."
    ),
    params=(
        Param("head", "size", default=4 * MIB, minimum=64 * KIB, maximum=1 * GIB, unit="bytes",
              description="objects up to this size are cached whole, larger ones this many "
              "first bytes"),
    ),
    methods=frozenset({"GET"}),
    stages=frozenset({"proxy"}),
    extra={"proxy_config": ["cache_dir", "cache_size"]},
)


SPEC = FilterSpec(METADATA)
