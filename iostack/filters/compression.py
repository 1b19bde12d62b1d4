"""``compression``: framed gzip or zstd, with Range reads.

Config (policy parameters)
    algorithm   ``gzip`` (RFC 1952 members, as in the IOStack paper) or ``zstd``
    level       compression level; gzip 1-9 (default 6), zstd 1-22 (default 3)
    frame_size  original bytes per frame (default 256 KiB)

(Implementation follows in the next commit.)
"""

from __future__ import annotations

from iostack.filters.base import FilterSpec
from iostack.filters.metadata import FilterMetadata, Param

KIB = 1024
MIB = 1024 * KIB

METADATA = FilterMetadata(
    name="compression",
    description=(
        "Compresses object bodies (gzip or zstd) in independently decodable frames with an "
        "index, so Range GETs decompress only the frames they need; stores incompressible "
        "frames raw."
    ),
    params=(
        Param("algorithm", "enum", default="zstd", choices=("gzip", "zstd"),
              description="gzip: RFC 1952 members readable by gzip(1); zstd: faster, denser"),
        Param("level", "int", default=None, minimum=1, maximum=22,
              description="compression level: gzip 1-9 (default 6), zstd 1-22 (default 3)"),
        Param("frame_size", "size", default=256 * KIB, minimum=64 * KIB, maximum=8 * MIB,
              unit="bytes", description="original bytes per independently decodable frame"),
    ),
    methods=frozenset({"PUT"}),
    stages=frozenset({"proxy", "object"}),
    changes_size=True,
    layout_group="compression",
    runs_before=("encryption",),
    extra={"range_capable": True},
)

SPEC = FilterSpec(METADATA)
