"""Which objects the proxy cache keeps, and under which version.

An object is cached when its resolved GET pipeline includes ``caching``; the
policy's ``head`` says how much of it. Resolution needs the object's
headers (``TO OBJECT_SIZE``, ``OBJECT_TYPE``, ``OBJECT_TAG`` conditions), so
it is done on the cached headers for a hit and on the backend's for a miss.

The *version* of an entry is a digest of every ``caching`` rule (set or
delete, whatever its conditions) at the levels that concern the object's
container: a rule added, removed or changed — including a policy removed and
set again, which gets new rule ids — makes older entries unreachable. Writes
publish invalidations only while some such rule exists; with none, no entry
of a future version can exist yet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from iostack.filters.builtin.caching import METADATA
from iostack.filters.library import get_filter
from iostack.filters.metadata import FilterMetadata
from iostack.policy.resolve import Level, RequestInfo, resolve
from iostack.stored_object import SIZE_HEADER


def caching_rules(levels: list[Level]) -> list[dict[str, Any]]:
    """Every ``caching`` rule (set or delete, whatever its conditions) at these levels."""
    return [rule for level in levels for rule in level.rules if rule.get("filter") == METADATA.name]


def entry_version(rules: list[dict[str, Any]]) -> str:
    """The cache version of objects under these rules: new rule ids or parameters, new version."""
    text = json.dumps(sorted(rules, key=lambda r: str(r.get("id"))), sort_keys=True, default=str)
    return "c1:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def tenant_request(path: str, headers: dict[str, str]) -> RequestInfo:
    """What the policy conditions see of a stored object (the tenant's size, type and tags)."""
    size = headers.get(SIZE_HEADER) or headers.get("Content-Length")
    return RequestInfo.from_path("GET", path, size=int(size) if size and size.isdigit() else None,
                                 headers=headers)


class CachingPolicy:
    """The ``caching`` rules that concern one object, and what they say for its headers."""

    def __init__(self, path: str, levels: list[Level], filters: Mapping[str, FilterMetadata],
                 object_types: Mapping[str, list[str]], rules: list[dict[str, Any]]) -> None:
        self.path = path
        self.levels = levels
        self.filters = filters
        self.object_types = object_types
        self.version = entry_version(rules)

    @classmethod
    def of(cls, path: str, levels: list[Level], filters: Mapping[str, FilterMetadata],
           object_types: Mapping[str, list[str]]) -> CachingPolicy | None:
        rules = caching_rules(levels)
        return cls(path, levels, filters, object_types, rules) if rules else None

    def head_for(self, headers: dict[str, str]) -> int | None:
        """The policy's ``head`` for the object with these headers; None if it is not cached
        (``TO`` conditions on size, type or tags do not hold)."""
        request = tenant_request(self.path, headers)
        for entry in resolve(request, self.levels, self.filters, self.object_types).pipeline:
            if entry.filter == METADATA.name:
                return get_filter(entry.filter).validate(entry.params)["head"]
        return None
