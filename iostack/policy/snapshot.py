"""The compiled policy state as a node holds it: read whole, versioned, kept on disk.

A proxy enforces from its own copy of everything the data path reads in the
policy store (``PolicyState``): the rules of every level, which containers
have object-level rules, group memberships, filter metadata and object
types, with the store's ``version`` and ``marker`` (its epoch).

- **Read whole, atomically.** ``read_state`` runs one Lua script
  (``STATE_LUA``) that scans the ``rules:*`` keys and reads them with the
  vocabulary, the version and the marker, so a copy is always one version
  of the store, never a mix. A store without its marker (flushed, restarted
  empty) gives no state: an empty store is not "no policy".
- **Revocation** (``revoked``: the operator's reason, empty when none) is
  part of the state: a version that revokes is applied, persisted and
  enforced like any other, and a node enforcing it refuses writes
  (``iostack.policy.reader``) until a later version reinstates the rules.
- **On disk** (``SnapshotFile``): the raw state (values as stored, JSON
  strings; nothing is evaluated) in a JSON document with its format, key
  prefix, version and a SHA-256 of the canonical state, written owner-only
  (0600) to a temporary file, fsynced and renamed over the previous one, so
  a reader finds either the old or the new copy, whole. A copy whose
  checksum, format or prefix does not match is not used. The workers of a
  proxy share the file; a worker never replaces a newer copy with an older
  one (checked under an exclusive lock on ``<file>.lock``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from iostack.filters.metadata import FilterMetadata
from iostack.policy.redis_keys import KeySpace, glob_escape
from iostack.policy.resolve import Level, RequestInfo
from iostack.private_files import write_private_json

LOG = logging.getLogger(__name__)
FORMAT = 1

# ARGV: prefix, the glob of its rules keys. Returns version, marker ('' if none), then
# (only with a marker) the rules keys with their hashes, tenant_groups, objrules,
# filters, object_types (hashes as flat lists) and the revocation ('' if none).
STATE_LUA = """
local p = ARGV[1]
local version = redis.call('GET', p .. 'version') or '0'
local marker = redis.call('GET', p .. 'marker') or ''
if marker == '' then return {version, marker} end
local rules, cursor = {}, '0'
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', ARGV[2], 'COUNT', 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    table.insert(rules, key); table.insert(rules, redis.call('HGETALL', key))
  end
until cursor == '0'
return {version, marker, rules, redis.call('HGETALL', p .. 'tenant_groups'),
        redis.call('HGETALL', p .. 'objrules'), redis.call('HGETALL', p .. 'filters'),
        redis.call('HGETALL', p .. 'object_types'), redis.call('GET', p .. 'revoked') or ''}
"""

RAW_PARTS = ("tenant_groups", "objrules", "filters", "object_types")


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _pairs(flat: list) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}


@dataclass
class PolicyState:
    """One version of the store's compiled policy state, decoded for the data path."""

    version: int
    marker: str
    raw: dict[str, Any]  # as stored: "rules" (key suffix -> {id: JSON}) and RAW_PARTS
    rules: dict[tuple[str, str], tuple[dict[str, Any], ...]] = field(default_factory=dict)
    tenant_groups: dict[str, list[str]] = field(default_factory=dict)
    objrules: frozenset[str] = frozenset()
    filters: dict[str, FilterMetadata] = field(default_factory=dict)
    object_types: dict[str, list[str]] = field(default_factory=dict)
    revoked: str = ""  # why an operator revoked the rules; "" when they stand

    @classmethod
    def decode(cls, version: int, marker: str, raw: dict[str, Any]) -> PolicyState:
        rules = {}
        for suffix, hashed in raw["rules"].items():
            level, _, target = suffix.partition(":")
            rules[(level, target)] = tuple(json.loads(v) for v in hashed.values())
        return cls(version, marker, raw, rules,
                   {a: json.loads(g) for a, g in raw["tenant_groups"].items()},
                   frozenset(raw["objrules"]),
                   {n: FilterMetadata.from_json(json.loads(v))
                    for n, v in raw["filters"].items()},
                   {n: json.loads(v) for n, v in raw["object_types"].items()},
                   revocation_reason(raw.get("revoked", "")))

    def levels(self, request: RequestInfo) -> list[Level]:
        """The levels that concern ``request``, most general first, as the store holds them.

        Object rules are looked at only for containers that have some (``objrules``)."""
        acct = request.account
        found = [("global", "*"), *(("group", g) for g in self.tenant_groups.get(acct, ())),
                 ("tenant", acct)]
        for container, obj in request.policy_paths:
            if not container:
                continue
            found += [("container", f"*/{container}"), ("container", f"{acct}/{container}")]
            if obj and f"{acct}/{container}" in self.objrules:
                found.append(("object", f"{acct}/{container}/{obj}"))
        return [Level(level, target, self.rules.get((level, target), ()))
                for level, target in found]

    def checksum(self) -> str:
        return checksum(self.version, self.marker, self.raw)


def revocation_reason(stored: str) -> str:
    """The reason of a stored revocation (``{"reason", "by", "at"}`` JSON), "" for none."""
    if not stored:
        return ""
    try:
        document = json.loads(stored)
        return str(document.get("reason") or "no reason given")
    except (ValueError, AttributeError):
        return "revoked (unreadable record)"


def checksum(version: int, marker: str, raw: dict[str, Any]) -> str:
    canonical = json.dumps([version, marker, raw], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class StateScript:
    """``read_state`` for one client and prefix (the script registered once)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.keys = KeySpace(prefix)
        self.script = client.register_script(STATE_LUA)

    def __call__(self) -> tuple[int, PolicyState | None]:
        """(the store's version, its state), the state None when the store has no marker.

        Raises ``redis.RedisError`` when the store cannot be read."""
        reply = self.script(args=[self.keys.prefix, glob_escape(self.keys.prefix) + "rules:*"])
        version, marker = int(reply[0]), _s(reply[1])
        if not marker:
            return version, None
        start = len(self.keys.prefix) + len("rules:")
        flat = reply[2]
        raw: dict[str, Any] = {"rules": {_s(flat[i])[start:]: _pairs(flat[i + 1])
                                         for i in range(0, len(flat), 2)}}
        for name, part in zip(RAW_PARTS, reply[3:7], strict=True):
            raw[name] = _pairs(part)
        raw["revoked"] = _s(reply[7])
        return version, PolicyState.decode(version, marker, raw)


class SnapshotFile:
    """A node's copy of the state on disk (see the module docstring)."""

    def __init__(self, path: str | Path, prefix: str) -> None:
        self.path = Path(path)
        self.prefix = prefix

    def load(self) -> PolicyState | None:
        """The copy on disk, or None when there is none or it cannot be trusted (logged)."""
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            LOG.error("policy snapshot %s unreadable, not used: %s", self.path, exc)
            return None
        try:
            if document["format"] != FORMAT or document["prefix"] != self.prefix:
                raise ValueError("another format or key prefix")
            version, marker, raw = int(document["version"]), document["marker"], document["state"]
            if checksum(version, marker, raw) != document["sha256"]:
                raise ValueError("checksum mismatch")
            return PolicyState.decode(version, marker, raw)
        except (KeyError, TypeError, ValueError) as exc:
            LOG.error("policy snapshot %s not used: %s", self.path, exc)
            return None

    def save(self, state: PolicyState) -> bool:
        """Replace the copy on disk by ``state`` unless the disk holds a newer one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{self.path}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = self._version_on_disk()
            if held is not None and held >= state.version:
                return False
            document = {"format": FORMAT, "prefix": self.prefix, "version": state.version,
                        "marker": state.marker, "sha256": state.checksum(), "state": state.raw}
            write_private_json(self.path, document, indent=None)
            return True
        finally:
            os.close(lock)

    def _version_on_disk(self) -> int | None:
        state = self.load()
        return None if state is None else state.version
