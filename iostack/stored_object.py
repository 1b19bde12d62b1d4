"""The stored-object record: what an object's sysmeta says about how IOStack stored it.

This module is the record's one home, shared by everything that writes or
reads stored objects: the Swift middleware (encode, decode, select, cache),
``atrest/`` (inspect, reconcile), the storlet runtime (which code versions
objects still need) and the tests. It names the sysmeta headers, the
backend headers the proxy and the object servers exchange about stored
forms, and the keys a sandboxed filter's entry carries.

Filters run in two layers: the proxy's (``ON PROXY``) and, below it, the
object servers' (``ON OBJECT``). Each layer records what it did in its own
sysmeta, as footers committed atomically with the body. The proxy layer
(``TENANT_LAYER``) records:

``X-Object-Sysmeta-Iostack-Pipeline``
    JSON list, in write order, of ``{"name", "params", "meta"}``: each filter
    that transformed the body, its non-secret parameters, and the small
    ``str -> str`` dict its encoder asked to keep (frame size, salt, ...).
``X-Object-Sysmeta-Iostack-Etag`` / ``X-Object-Sysmeta-Iostack-Size``
    MD5 and length of the body the tenant sent.

``X-Object-Sysmeta-Iostack-Format``
    The record's format and the release that wrote it (``1 iostack/0.1.0``).

plus Swift's container-update overrides, so listings show the tenant's size
and ETag. A record of byte-preserving filters only (``noop``) has no ETag,
size or overrides: the stored object's are the tenant's. The object layer
(``OBJECT_LAYER``) records the same four items under
``X-Object-Sysmeta-Iostack-Object-*`` about the bytes the object server
received (the proxy layer's output). GET and HEAD undo exactly what the
records say, whatever the policies say today, lower layer first. Records are
parsed as JSON and checked field by field: object metadata is never evaluated
or unpickled.

Formats: ``RECORD_FORMAT`` is the newest format this release writes and
reads; a change of what any part of a record means (a field, a filter's
``meta``, a stored form) makes a new one. A record without a format header
was written before formats were recorded, and is format 1. A reader meeting
a newer format than it knows refuses that object (``NewerRecordError``, a
503 naming the format and the release that wrote it) rather than guess:
never a 500, never a body decoded the old way.

A filter that ran in the Storlets sandbox keeps four keys in its entry's
``meta`` (``RUNTIME_KEY`` and the three after it): the runtime
(``storlet``), the storlet's name, the length of the bytes it encoded and
the SHA-256 of the code that encoded them, so a GET decodes without a policy
lookup and with the very code that encoded.

Backend headers (``X-Backend-*``: Swift's gatekeeper strips them from
clients, so only the proxy or callers on the storage network send them):
``X-Backend-Iostack-Object-Filters`` carries the ``ON OBJECT`` filters to
the object servers; ``X-Backend-Iostack-Raw: true`` asks an object server
for the stored bytes and records, undecoded (``atrest/`` reads so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iostack import __version__
from iostack.filters.errors import FilterUnavailable, IntegrityError

SYSMETA_PREFIX = "X-Object-Sysmeta-Iostack-"
PIPELINE_HEADER = SYSMETA_PREFIX + "Pipeline"
ETAG_HEADER = SYSMETA_PREFIX + "Etag"
SIZE_HEADER = SYSMETA_PREFIX + "Size"
OVERRIDE_PREFIX = "X-Object-Sysmeta-Container-Update-Override-"
OBJECT_SYSMETA_PREFIX = SYSMETA_PREFIX + "Object-"
# The proxy tells the object servers which filters to run ON OBJECT (gatekeeper
# strips X-Backend-* headers from clients, so only the proxy can send it).
OBJECT_FILTERS_HEADER = "X-Backend-Iostack-Object-Filters"
RAW_HEADER = "X-Backend-Iostack-Raw"
RECORD_FORMAT = 1
# Swift's header values are limited (8 KiB per line in the servers); keep well below.
MAX_RECORD_BYTES = 4096


# The keys of a sandboxed filter's entry ``meta``.
RUNTIME_KEY = "iostack.runtime"
STORLET_KEY = "iostack.storlet"
LENGTH_KEY = "iostack.length"
CODE_KEY = "iostack.code_sha256"


@dataclass(frozen=True)
class Layer:
    """The sysmeta names of one layer's record."""

    pipeline_header: str
    size_header: str
    etag_header: str
    format_header: str
    # Headers that describe this layer's stored form; they never travel with
    # the decoded body (a server-side copy would attach them to another object).
    stored_form_prefixes: tuple[str, ...]

    def describes_stored_form(self, header: str) -> bool:
        return header.title().startswith(self.stored_form_prefixes)


TENANT_LAYER = Layer(PIPELINE_HEADER, SIZE_HEADER, ETAG_HEADER, SYSMETA_PREFIX + "Format",
                     (SYSMETA_PREFIX, OVERRIDE_PREFIX))
OBJECT_LAYER = Layer(OBJECT_SYSMETA_PREFIX + "Pipeline", OBJECT_SYSMETA_PREFIX + "Size",
                     OBJECT_SYSMETA_PREFIX + "Etag", OBJECT_SYSMETA_PREFIX + "Format",
                     (OBJECT_SYSMETA_PREFIX,))


class NewerRecordError(FilterUnavailable):
    """The record is in a format newer than this release reads (a 503: see the docstring)."""


@dataclass(frozen=True)
class AppliedFilter:
    name: str
    params: dict[str, Any]
    meta: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params, "meta": self.meta}


def dump_pipeline(applied: list[AppliedFilter]) -> str:
    text = json.dumps([a.to_json() for a in applied], separators=(",", ":"), sort_keys=True)
    if len(text) > MAX_RECORD_BYTES:
        raise ValueError(f"filter record of {len(text)} bytes exceeds {MAX_RECORD_BYTES}")
    return text


def record_headers(layer: Layer, applied: list[AppliedFilter]) -> dict[str, str]:
    """The sysmeta that records ``applied`` for ``layer``, in this release's format."""
    return {layer.pipeline_header: dump_pipeline(applied),
            layer.format_header: f"{RECORD_FORMAT} iostack/{__version__}"}


def read_pipeline(headers: Mapping[str, str], layer: Layer) -> list[AppliedFilter]:
    """The filters ``layer``'s record in ``headers`` lists, once its format is one this
    release reads (``NewerRecordError`` otherwise; ``IntegrityError`` if damaged).
    Header names are matched in any case."""
    lower = {name.lower(): value for name, value in headers.items()}
    value = lower.get(layer.format_header.lower())
    if value is not None:
        words = value.split()
        if not words or not words[0].isdigit():
            raise IntegrityError(f"object sysmeta: bad {layer.format_header} {value!r:.60}")
        if int(words[0]) > RECORD_FORMAT:
            writer = words[1] if len(words) > 1 else "an unnamed release"
            raise NewerRecordError(
                f"the object's record is in format {words[0]}, written by {writer}; this "
                f"IOStack ({__version__}) reads formats up to {RECORD_FORMAT}: read it "
                "through an upgraded proxy")
    return load_pipeline(lower[layer.pipeline_header.lower()])


def load_pipeline(text: str) -> list[AppliedFilter]:
    """Parse a stored record; a malformed one means the object's metadata is damaged."""
    try:
        data = json.loads(text)
    except ValueError:
        raise IntegrityError("object sysmeta: filter record is not JSON") from None
    if not isinstance(data, list):
        raise IntegrityError("object sysmeta: filter record is not a list")
    applied = []
    for item in data:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("params", {}), dict)
                and _str_map(item.get("meta", {}))):
            raise IntegrityError(f"object sysmeta: bad filter record entry {item!r:.100}")
        applied.append(AppliedFilter(item["name"], item.get("params", {}), item.get("meta", {})))
    return applied


def is_sandboxed(meta: Mapping[str, str]) -> bool:
    """Whether a filter entry's ``meta`` says the Storlets sandbox encoded it."""
    return meta.get(RUNTIME_KEY) == "storlet"


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def original_size(headers: Mapping[str, str], layer: Layer) -> int:
    try:
        size = int(headers[layer.size_header])
    except (KeyError, ValueError):
        raise IntegrityError(f"object sysmeta: {layer.size_header} missing or bad") from None
    if size < 0:
        raise IntegrityError(f"object sysmeta: {layer.size_header} is negative")
    return size
