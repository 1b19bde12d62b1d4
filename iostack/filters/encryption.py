"""``encryption``: AES-256-GCM in fixed-size authenticated frames.

(Implementation follows in the next commit.)
"""

from __future__ import annotations

from iostack.filters.base import FilterSpec
from iostack.filters.metadata import FilterMetadata, Param

KIB = 1024
MIB = 1024 * KIB

METADATA = FilterMetadata(
    name="encryption",
    description=(
        "Encrypts object bodies with AES-256-GCM in fixed-size authenticated frames under a "
        "per-object key derived from the tenant's key; Range-capable; tampering, truncation "
        "and reordering are detected on GET."
    ),
    params=(
        Param("frame_size", "size", default=64 * KIB, minimum=4 * KIB, maximum=4 * MIB,
              unit="bytes", description="plaintext bytes per authenticated frame"),
    ),
    methods=frozenset({"PUT"}),
    stages=frozenset({"proxy"}),
    changes_size=True,
    layout_group="encryption",
    extra={"range_capable": True, "needs": ["key_file"]},
)

SPEC = FilterSpec(METADATA)
