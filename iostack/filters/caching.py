"""``caching``: a proxy-side cache of object heads on a fast directory.

(Implementation follows in the next commit.)
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
