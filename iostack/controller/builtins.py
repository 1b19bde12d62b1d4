"""The vocabulary a fresh controller starts with.

Filters come from the filter library (``iostack.filters.registry``, object
filters) and the block bridge (``iostack.block_bridge.catalog``, block
filters, ``extra["domain"] == "block"``); the
metrics are those the monitoring middleware publishes; the QoS classes and
object types are defaults an administrator can change or delete (seeding
never brings back what an administrator removed, see ``registry.seed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iostack.block_bridge.catalog import block_filters, block_validators
from iostack.dsl.vocabulary import Metric, QosClass
from iostack.filters.metadata import FilterMetadata
from iostack.filters.registry import builtin_metadata, get_filter


def builtin_filters() -> list[FilterMetadata]:
    return [*builtin_metadata(), *block_filters()]


def builtin_validators() -> dict[str, Callable[[dict[str, Any]], None]]:
    """Each built-in filter's own parameter check (cross-parameter rules included)."""
    library = {meta.name: get_filter(meta.name).validate for meta in builtin_metadata()}
    return library | block_validators()


METRICS = (
    Metric("GETS_SEC", "number", "GET requests per second"),
    Metric("PUTS_SEC", "number", "PUT requests per second"),
    Metric("GET_BW", "rate", "bytes per second read by GETs"),
    Metric("PUT_BW", "rate", "bytes per second written by PUTs"),
    Metric("ACTIVE_REQUESTS", "number", "requests in progress"),
    Metric("LATENCY", "duration", "mean request latency"),
)

# Classes only use library filters, so they check on a fresh stack.
CLASSES = (
    QosClass("GOLD", "SET caching WITH head=16M", "hot data: larger flash-cached object heads"),
    QosClass("SILVER", "SET caching WITH head=1M", "warm data: small flash-cached heads"),
    QosClass("BRONZE", "SET compression WITH algorithm=zstd", "cold data: store less"),
)

OBJECT_TYPES = {
    "DOCS": [r"\.(pdf|docx?|odt|rtf|txt|md)$"],
    "IMAGES": [r"\.(jpe?g|png|gif|bmp|tiff?|webp)$", "mime:^image/"],
    "VIDEO": [r"\.(mp4|mkv|avi|mov|webm)$", "mime:^video/"],
    "CSV": [r"\.csv$", "mime:^text/csv"],
    "LOGS": [r"\.log(\.\d+)?$", r"(^|/)logs?/"],
    "ARCHIVES": [r"\.(zip|tar|tgz|gz|bz2|xz|zst|7z)$"],
}

