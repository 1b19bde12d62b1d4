"""The vocabulary a fresh controller starts with.

Filters come from the filter library (``iostack.filters.library``, object
filters) and the catalogs other components register under the entry-point
group ``iostack.filter_catalogs`` (``iostack.filters.catalogs``: the block
bridge's block filters, ``extra["domain"] == "block"``); the
metrics are those the monitoring middleware publishes; the QoS classes and
object types are defaults an administrator can change or delete (seeding
never brings back what an administrator removed, see ``registry.seed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iostack.dsl.vocabulary import QosClass
from iostack.filters.catalogs import registered_catalogs
from iostack.filters.library import builtin_metadata, get_filter
from iostack.filters.metadata import FilterMetadata
from iostack.monitoring.aggregator import METRICS  # noqa: F401 - the seeded metrics


def builtin_filters() -> list[FilterMetadata]:
    return [*builtin_metadata(), *(meta for catalog in registered_catalogs()
                                   for meta in catalog.filters())]


def builtin_validators() -> dict[str, Callable[[dict[str, Any]], None]]:
    """Each built-in filter's own parameter check (cross-parameter rules included)."""
    checks = {meta.name: get_filter(meta.name).validate for meta in builtin_metadata()}
    for catalog in registered_catalogs():
        checks |= catalog.validators()
    return checks


# Classes only use library filters, so they check on a fresh stack.
CLASSES = (
    QosClass("GOLD", "SET caching WITH head=16M, SET bandwidth WITH share=4",
             "hot data: larger flash-cached object heads, 4 shares of spare bandwidth"),
    QosClass("SILVER", "SET caching WITH head=1M, SET bandwidth WITH share=2",
             "warm data: small flash-cached heads, 2 shares of spare bandwidth"),
    QosClass("BRONZE", "SET compression WITH algorithm=zstd, SET bandwidth WITH share=1",
             "cold data: store less, 1 share of spare bandwidth"),
)

OBJECT_TYPES = {
    "DOCS": [r"\.(pdf|docx?|odt|rtf|txt|md)$"],
    "IMAGES": [r"\.(jpe?g|png|gif|bmp|tiff?|webp)$", "mime:^image/"],
    "VIDEO": [r"\.(mp4|mkv|avi|mov|webm)$", "mime:^video/"],
    "CSV": [r"\.csv$", "mime:^text/csv"],
    "LOGS": [r"\.log(\.\d+)?$", r"(^|/)logs?/"],
    "ARCHIVES": [r"\.(zip|tar|tgz|gz|bz2|xz|zst|7z)$"],
}

