"""What one stored object went through, and whether today's policy would store it differently.

Everything about the stored form comes from one raw HEAD (``swift_access``):
the two layers' filter records (``iostack.stored_object``),
the stored length, the tenant's length and ETag. Today's pipeline is that of
a PUT of the same object (its size, type, user metadata and age), resolved
from the proxies' policy store by the resolution they run (``explain``'s).
The policy version an object was written under is the policy history's
last version at the object's timestamp (``written_under``): records do not
name one, and history is where versions are kept.

Parameters declared ``secret`` never leave the object (the proxies do not
record them); any that a sandboxed filter's record holds are shown as ``***``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from swift.common.utils import Timestamp

from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.filters.metadata import FilterMetadata, public_params
from iostack.stored_object import (
    CODE_KEY,
    OBJECT_LAYER,
    STORLET_KEY,
    TENANT_LAYER,
    AppliedFilter,
    Layer,
    is_sandboxed,
    read_pipeline,
)

SECRET = "***"  # noqa: S105 - the mask shown for secret values
LAYERS: dict[str, Layer] = {"proxy": TENANT_LAYER, "object": OBJECT_LAYER}
# Filter steps as compared: (name, non-secret parameters).
Step = tuple[str, dict[str, Any]]


@dataclass
class StoredObject:
    """An object as stored: its records and the attributes a re-encoding must keep."""

    account: str
    container: str
    obj: str
    stored_bytes: int
    logical_bytes: int
    etag: str  # the tenant's
    timestamp: str  # Swift's internal form, offset included
    last_modified: str
    content_type: str
    kind: str  # object | slo-manifest | dlo-manifest | symlink
    user_meta: dict[str, str] = field(default_factory=dict)
    delete_at: int | None = None
    layers: dict[str, list[AppliedFilter]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"/v1/{self.account}/{self.container}/{self.obj}"

    @property
    def filtered(self) -> bool:
        return any(self.layers.values())


def _kind(headers: Mapping[str, str]) -> str:
    if headers.get("x-static-large-object", "").lower() == "true":
        return "slo-manifest"
    if "x-object-manifest" in headers:
        return "dlo-manifest"
    if "x-object-sysmeta-symlink-target" in headers:
        return "symlink"
    return "object"


def stored_object(account: str, container: str, obj: str,
                  headers: Mapping[str, str]) -> StoredObject:
    """Parse a raw HEAD's headers (``IntegrityError`` for a damaged record,
    ``NewerRecordError`` for one this release cannot read)."""
    lower = {k.lower(): v for k, v in headers.items()}
    layers = {name: read_pipeline(headers, layer)
              if layer.pipeline_header.lower() in lower else []
              for name, layer in LAYERS.items()}
    stored = int(lower.get("content-length", 0))
    # Tenant bytes -> proxy layer -> object layer -> disk: each layer that changed
    # the size recorded what it received.
    below = int(lower.get(OBJECT_LAYER.size_header.lower(), stored))
    logical = int(lower.get(TENANT_LAYER.size_header.lower(), below))
    etag = (lower.get(TENANT_LAYER.etag_header.lower())
            or lower.get(OBJECT_LAYER.etag_header.lower()) or lower.get("etag", "")).strip('"')
    delete_at = lower.get("x-delete-at")
    return StoredObject(
        account=account, container=container, obj=obj, stored_bytes=stored,
        logical_bytes=logical, etag=etag,
        timestamp=lower.get("x-backend-timestamp") or lower.get("x-timestamp", "0"),
        last_modified=lower.get("last-modified", ""),
        content_type=lower.get("content-type", ""), kind=_kind(lower),
        user_meta={k[len("x-object-meta-"):]: v for k, v in lower.items()
                   if k.startswith("x-object-meta-")},
        delete_at=int(delete_at) if delete_at and delete_at.isdigit() else None,
        layers=layers)


# -- today's pipeline -----------------------------------------------------------


def _without_secrets(params: Mapping[str, Any], meta: FilterMetadata | None) -> dict[str, Any]:
    # What records hold (``public_params``); explain's answers come masked already.
    return {k: v for k, v in public_params(meta, params).items() if v != SECRET}


def today_layers(explain: Mapping[str, Any],
                 filters: Mapping[str, FilterMetadata]) -> dict[str, list[Step]]:
    """The body-transforming steps a PUT gets today, per layer, as records hold them."""
    layers: dict[str, list[Step]] = {"proxy": [], "object": []}
    for entry in explain["pipeline"]:
        name, meta = entry["filter"], filters.get(entry["filter"])
        params = _without_secrets(entry["params"], meta)
        if entry.get("sandboxed"):
            layers["proxy"].append((name, params))  # sandboxed filters run on proxies
            continue
        try:
            spec = get_filter(name)
        except FilterError:
            continue
        if not spec.transforms_body:
            continue
        layers["object" if entry.get("stage") == "object" else "proxy"].append(
            (spec.name, _with_defaults(spec.name, params)))
    return layers


def _with_defaults(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` typed with the defaults filled in, as today's data path runs them.

    Records written before a default was filled in hold ``None`` for it (the
    compression level): such a record ran with that default, so it compares
    equal to today's explicit value."""
    try:
        spec = get_filter(name)
        given = {k: v for k, v in params.items() if v is not None}
        return _without_secrets(spec.validate(given), spec.metadata)
    except FilterError:
        return params  # compared as given; the proxies would refuse such a PUT anyway


def masked(pipeline: list[dict[str, Any]],
           filters: Mapping[str, FilterMetadata]) -> list[dict[str, Any]]:
    """Pipeline entries (``PipelineEntry.to_json``) with ``secret`` parameters as ``***``."""
    out = []
    for entry in pipeline:
        out.append(entry | {"params": public_params(filters.get(entry["filter"]),
                                                    entry["params"], mask=SECRET)})
    return out


def recorded_layers(stored: StoredObject,
                    filters: Mapping[str, FilterMetadata]) -> dict[str, list[Step]]:
    return {layer: [(a.name, _with_defaults(a.name, _without_secrets(a.params,
                                                                     filters.get(a.name))))
                     for a in applied]
            for layer, applied in stored.layers.items()}


def differences(stored: StoredObject, today: Mapping[str, list[Step]],
                filters: Mapping[str, FilterMetadata]) -> list[str]:
    """Why today's policy would store the object differently (empty: it would not)."""
    if stored.kind != "object":
        return []  # manifests and symlinks are stored as written, whatever the policy
    reasons = []
    for layer, steps in recorded_layers(stored, filters).items():
        if steps != today[layer]:
            reasons.append(f"{layer} layer: stored with {describe(steps)}, "
                           f"today {describe(today[layer])}")
    return reasons


def describe(steps: list[Step]) -> str:
    if not steps:
        return "no filter"
    return " -> ".join(f"{name}({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})"
                       for name, params in steps)


# -- history --------------------------------------------------------------------


def written_under(history: list[Mapping[str, Any]], timestamp: str) -> int | None:
    """The policy version in force at ``timestamp`` (None before history began)."""
    at = float(Timestamp(timestamp))
    versions = [e["version"] for e in history if e.get("time", 0) <= at]
    return max(versions) if versions else None


# -- the answer -----------------------------------------------------------------


def _applied_json(applied: AppliedFilter, meta: FilterMetadata | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "filter": applied.name,
        "params": public_params(meta, applied.params, mask=SECRET),
        "sysmeta": {k: v for k, v in applied.meta.items() if not k.startswith("iostack.")},
    }
    if is_sandboxed(applied.meta):
        item["sandboxed"] = {"storlet": applied.meta.get(STORLET_KEY),
                             "code_sha256": applied.meta.get(CODE_KEY)}
    return item


def inspect_json(stored: StoredObject, explain: Mapping[str, Any],
                 filters: Mapping[str, FilterMetadata],
                 history: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``iostack object inspect --json``."""
    reasons = differences(stored, today_layers(explain, filters), filters)
    return {
        "path": stored.path,
        "kind": stored.kind,
        "filtered": stored.filtered,
        "layers": {layer: [_applied_json(a, filters.get(a.name)) for a in applied]
                   for layer, applied in stored.layers.items()},
        "logical_bytes": stored.logical_bytes,
        "stored_bytes": stored.stored_bytes,
        "etag": stored.etag,
        "last_modified": stored.last_modified,
        "content_type": stored.content_type,
        "x_delete_at": stored.delete_at,
        "written_under_version": written_under(history, stored.timestamp),
        "today": {"differs": bool(reasons), "reasons": reasons,
                  "pipeline": explain["pipeline"]},
    }
