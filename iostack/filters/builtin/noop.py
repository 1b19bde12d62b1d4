"""``noop``: passes bodies through unchanged.

It exists to measure the framework itself: a policy ``SET NOOP`` exercises
classification, resolution, sysmeta and the streaming plumbing while the
filter adds no work of its own. No parameters.

It preserves bytes (``FilterSpec.preserves_bytes``), so a pipeline of noop
alone costs what any byte-preserving pipeline costs: the record goes with the
request headers and Swift's own ETag and length checks stand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from iostack.filters.base import ByteSource, FilterContext, FilterSpec
from iostack.filters.metadata import FilterMetadata

METADATA = FilterMetadata(
    name="noop",
    description="Identity filter: passes the body through; measures the framework's own cost.",
    methods=frozenset({"PUT", "GET"}),
    stages=frozenset({"proxy", "object"}),
    sandboxable=True,
)


class NoopEncoder:
    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        del params, context  # nothing to configure

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        yield from chunks

    def sysmeta(self) -> dict[str, str]:
        return {}


def open_view(lower: ByteSource, sysmeta: Mapping[str, str], context: FilterContext) -> ByteSource:
    return lower


SPEC = FilterSpec(METADATA, make_encoder=NoopEncoder, make_view=open_view, preserves_bytes=True)
