"""The vocabulary registries in Redis: filters, metrics, QoS classes, groups, object types, tenants.

Policies are checked against what these hold at that moment, so registering
a filter or a metric makes it usable in the very next policy. Every change
bumps the ``version`` key and announces it on the ``invalidate`` channel in
the same transaction, so data-path caches drop what they hold.

``seed`` installs the built-in vocabulary. It is idempotent and never
clobbers the administrator: a name is seeded once (remembered in the
``seeded`` set), so a class the administrator deleted stays deleted; library
filters are refreshed on upgrade only while their stored copy is still the
library's own (``extra.origin == "builtin"``).

``after_commit`` is called after each committed change, as the policy
store's is: the controller journals the namespace there
(``StoreGuardian.journal_committed``), so a store lost right after a
registry change is restored with it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

from iostack.controller import builtins
from iostack.dsl.checker import check_text
from iostack.dsl.errors import DSLError
from iostack.dsl.vocabulary import QosClass, Vocabulary
from iostack.filters.metadata import FilterMetadata
from iostack.filters.regex import RegexError, compile_regex
from iostack.monitoring.metric import Metric
from iostack.policy.changes import announce
from iostack.policy.redis_keys import KeySpace

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class RegistryError(ValueError):
    """A registration that cannot be accepted; ``status`` is the HTTP status to report."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise RegistryError(f"bad {kind} name {name!r}: letters, digits, '_', '.', '-' "
                            f"(starting with a letter), at most 64")
    return name


class Registries:
    def __init__(self, client: redis.Redis, keys: KeySpace, reseller_prefix: str = "AUTH_"):
        self.redis = client
        self.keys = keys
        self.reseller_prefix = reseller_prefix
        self.after_commit: Callable[[], object] = lambda: None

    # -- reading ----------------------------------------------------------------

    def vocabulary(self, client: redis.Redis | None = None) -> Vocabulary:
        """Everything the checker needs, read in one round trip."""
        k = self.keys
        pipe = (client or self.redis).pipeline(transaction=False)
        for key in (k.filters, k.metrics, k.classes, k.groups, k.object_types):
            pipe.hgetall(key)
        pipe.smembers(k.tenants)
        pipe.hgetall(k.tenant_names)
        filters, metrics, classes, groups, object_types, tenants, names = pipe.execute()
        return Vocabulary(
            filters={n: FilterMetadata.from_json(json.loads(v)) for n, v in filters.items()},
            metrics={n: Metric.from_json(json.loads(v)) for n, v in metrics.items()},
            classes={n: QosClass.from_json(json.loads(v)) for n, v in classes.items()},
            groups={n: json.loads(v) for n, v in groups.items()},
            object_types={n: json.loads(v) for n, v in object_types.items()},
            tenants=set(tenants), tenant_names=names, reseller_prefix=self.reseller_prefix,
            validators=_library_validators(filters),
        )

    def list(self, kind: str) -> dict[str, Any]:
        key = self._hash(kind)
        return {name: json.loads(value) for name, value in sorted(self.redis.hgetall(key).items())}

    def get(self, kind: str, name: str) -> Any:
        raw = self.redis.hget(self._hash(kind), self._key_name(kind, name))
        if raw is None:
            raise RegistryError(f"no {kind[:-1].replace('_', ' ')} {name!r}", status=404)
        return json.loads(raw)

    def tenants(self) -> list[str]:
        return sorted(self.redis.smembers(self.keys.tenants))

    # -- writing ----------------------------------------------------------------

    def put_filter(self, data: dict[str, Any]) -> FilterMetadata:
        try:
            meta = FilterMetadata.from_json(data)
        except (TypeError, ValueError, KeyError) as exc:
            raise RegistryError(f"bad filter metadata: {exc}") from None
        name = check_name("filter", meta.name).lower()
        if name != meta.name:
            raise RegistryError(f"filter names are lower-case: use {name!r}")
        if meta.extra.get("domain", "object") not in ("object", "block"):
            raise RegistryError("extra.domain must be 'object' or 'block'")
        if name.upper() in self.redis.hkeys(self.keys.classes):
            raise RegistryError(f"a QoS class is called {name.upper()}", status=409)
        extra = dict(meta.extra)
        extra.setdefault("origin", "admin")
        meta = FilterMetadata.from_json(meta.to_json() | {"extra": extra})
        self._write(self.keys.filters, name, meta.to_json())
        return meta

    def put_metric(self, data: dict[str, Any]) -> Metric:
        try:
            metric = Metric.from_json(data)
        except (TypeError, ValueError, KeyError) as exc:
            raise RegistryError(f"bad metric: {exc}") from None
        check_name("metric", metric.name)
        self._write(self.keys.metrics, metric.name, metric.to_json())
        return metric

    def put_class(self, data: dict[str, Any]) -> QosClass:
        """Define a class from ``{"name", "actions"}``; its actions are checked now."""
        try:
            name = check_name("class", str(data["name"])).upper()
            text = f"DEFINE CLASS {name} AS {data['actions']}"
        except KeyError as exc:
            raise RegistryError(f"missing field {exc}") from None
        try:
            result = check_text(text, self.vocabulary())
        except DSLError as exc:
            raise RegistryError(str(exc)) from None
        if len(result.classes) != 1:
            raise RegistryError("actions must be one list of SET/DELETE actions")
        qos = QosClass(name, result.classes[0].qos_class.actions, data.get("description", ""))
        self._write(self.keys.classes, name, qos.to_json())
        return qos

    def put_object_type(self, name: str, patterns: list[str]) -> list[str]:
        name = check_name("object type", name).upper()
        if not isinstance(patterns, list) or not patterns or \
                not all(isinstance(p, str) for p in patterns):
            raise RegistryError("patterns must be a non-empty list of regular expressions")
        for pattern in patterns:
            try:
                compile_regex(pattern.removeprefix("mime:"))  # as the data path will run it
            except RegexError as exc:
                raise RegistryError(f"bad pattern {pattern!r}: {exc}") from None
        self._write(self.keys.object_types, name, patterns)
        return patterns

    def put_group(self, name: str, tenants: list[str]) -> list[str]:
        """Set a group's members (tenant names or accounts), keeping the reverse index in step."""
        check_name("group", name)
        if not isinstance(tenants, list) or not all(isinstance(t, str) and t for t in tenants):
            raise RegistryError("tenants must be a list of tenant names")
        vocab = Vocabulary(reseller_prefix=self.reseller_prefix,
                           tenant_names=self.redis.hgetall(self.keys.tenant_names))
        accounts = sorted({vocab.account(t) for t in tenants})

        def update(pipe: redis.client.Pipeline) -> None:
            old = json.loads(pipe.hget(self.keys.groups, name) or "[]")
            memberships = {a: json.loads(pipe.hget(self.keys.tenant_groups, a) or "[]")
                           for a in set(old) | set(accounts)}
            pipe.multi()
            for account, groups in memberships.items():
                groups = sorted((set(groups) - {name}) | ({name} if account in accounts else set()))
                if groups:
                    pipe.hset(self.keys.tenant_groups, account, json.dumps(groups))
                else:
                    pipe.hdel(self.keys.tenant_groups, account)
            pipe.hset(self.keys.groups, name, json.dumps(accounts))
            announce(pipe, self.keys)

        self.redis.transaction(update, self.keys.groups, self.keys.tenant_groups)
        self.after_commit()
        return accounts

    def add_tenant(self, tenant: str, account: str | None = None) -> str:
        """Record a tenant as known; with ``account``, policies may name it ``tenant``."""
        if account is not None:
            check_name("tenant", tenant)
        account = account or Vocabulary(reseller_prefix=self.reseller_prefix).account(tenant)
        check_name("tenant", account)
        pipe = self.redis.pipeline()
        pipe.sadd(self.keys.tenants, account)
        if account != tenant:
            pipe.hset(self.keys.tenant_names, tenant, account)
        announce(pipe, self.keys)
        pipe.execute()
        self.after_commit()
        return account

    def delete(self, kind: str, name: str) -> None:
        """Remove a registry entry that no stored policy uses."""
        name = self._key_name(kind, name)
        users = self._users(kind, name)
        if users:
            raise RegistryError(f"{kind[:-1].replace('_', ' ')} {name!r} is used by policies "
                                f"{', '.join(users)}: remove them first", status=409)
        if kind == "groups":
            self.put_group(name, [])
        pipe = self.redis.pipeline()
        pipe.hdel(self._hash(kind), name)
        announce(pipe, self.keys)
        if pipe.execute()[0] == 0:
            raise RegistryError(f"no {kind[:-1].replace('_', ' ')} {name!r}", status=404)
        self.after_commit()

    def seed(self, mark: bool = True) -> list[str]:
        """Install the built-in vocabulary, keeping administrator changes; return what was added.

        ``mark``: give an unmarked namespace its marker (a first set-up). The
        controller passes False when it has a journal it could not restore
        from, so seeding never vouches for an emptied store.
        """
        k = self.keys
        entries: list[tuple[str, str, Any]] = []
        for meta in builtins.builtin_filters():
            extra = dict(meta.extra) | {"origin": "builtin"}
            entries.append((k.filters, meta.name, meta.to_json() | {"extra": extra}))
        entries += [(k.metrics, m.name, m.to_json()) for m in builtins.METRICS]
        entries += [(k.classes, c.name, c.to_json()) for c in builtins.CLASSES]
        entries += [(k.object_types, n, p) for n, p in builtins.OBJECT_TYPES.items()]
        seeded_key = k.prefix + "seeded"
        added = []
        pipe = self.redis.pipeline()
        for key, name, value in entries:
            marker = f"{key.removeprefix(k.prefix)}:{name}"
            stored = self.redis.hget(key, name)
            fresh = not self.redis.sismember(seeded_key, marker)
            upgrade = (key == k.filters and stored is not None
                       and json.loads(stored).get("extra", {}).get("origin") == "builtin"
                       and json.loads(stored) != value)
            if (fresh and stored is None) or upgrade:
                pipe.hset(key, name, json.dumps(value))
                added.append(marker)
            pipe.sadd(seeded_key, marker)
        if mark:
            pipe.setnx(k.marker, json.dumps({"epoch": uuid.uuid4().hex, "set": time.time()}))
        if added:
            announce(pipe, k)
        pipe.execute()
        if added:
            self.after_commit()
        return added

    # -- helpers ----------------------------------------------------------------

    _HASHES = ("filters", "metrics", "classes", "groups", "object_types")

    def _hash(self, kind: str) -> str:
        if kind not in self._HASHES:
            raise RegistryError(f"unknown registry {kind!r}", status=404)
        return getattr(self.keys, kind)

    @staticmethod
    def _key_name(kind: str, name: str) -> str:
        if kind == "filters":
            return name.lower()
        if kind in ("metrics", "classes", "object_types"):
            return name.upper()
        return name

    def _write(self, key: str, name: str, value: Any) -> None:
        pipe = self.redis.pipeline()
        pipe.hset(key, name, json.dumps(value))
        announce(pipe, self.keys)
        pipe.execute()
        self.after_commit()

    def _users(self, kind: str, name: str) -> list[str]:
        """Ids of stored policies that use ``name`` (so deleting it would break them)."""
        users = []
        for pid, raw in self.redis.hgetall(self.keys.policies).items():
            record = json.loads(raw)
            if kind == "filters" and any(a["filter"] == name for a in record["actions"]):
                users.append(pid)
            elif kind == "groups" and {"kind": "group", "name": name} in record["targets"]:
                users.append(pid)
            elif kind == "object_types" and {"kind": "type", "value": name} in \
                    record["object_conds"]:
                users.append(pid)
            elif kind == "metrics" and name in _metrics_of(record.get("condition")):
                users.append(pid)
        return sorted(users, key=lambda p: int(p.lstrip("P")) if p[1:].isdigit() else 0)


def _metrics_of(condition: dict[str, Any] | None) -> set[str]:
    if not condition:
        return set()
    if "metric" in condition:
        return {condition["metric"]}
    return _metrics_of(condition["left"]) | _metrics_of(condition["right"])


def _library_validators(filters: dict[str, str]):
    """The built-in filters' own parameter checks, for those the admin has not replaced."""
    checks = builtins.builtin_validators()
    return {name: checks[name] for name, raw in filters.items()
            if name in checks and json.loads(raw).get("extra", {}).get("origin") == "builtin"}
