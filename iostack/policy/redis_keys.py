"""Redis key names of the controller (the one place they are spelled).

All keys live under a configurable prefix (``iostack:`` by default) so
several stacks, or tests, can share one Redis. Values are JSON, never
pickled. The full schema, with value shapes, is in ``docs/redis-keys.md``:

====================================  =======  ==========================================
key (after the prefix)                type     value
====================================  =======  ==========================================
``filters``                           hash     filter name -> FilterMetadata JSON
``metrics``                           hash     METRIC -> {name, kind, description}
``classes``                           hash     CLASS -> {name, actions (DSL), description}
``groups``                            hash     group -> JSON list of Swift accounts
``tenant_groups``                     hash     account -> JSON list of its groups
``object_types``                      hash     TYPE -> JSON list of patterns
``tenants``                           set      known Swift accounts
``policies``                          hash     policy id -> policy record JSON
``policy_seq``                        string   last policy number (INCR)
``rules:<level>:<target>``            hash     rule id -> rule JSON (compiled pipeline entries)
``objrules``                          hash     ``account/container`` -> its object-level rules
``version``                           string   bumped by every change (INCR)
``marker``                            string   the store's epoch, set by the controller that
                                               set the namespace up (or restored it); without
                                               it nodes apply nothing from the store
``revoked``                           string   ``{"reason", "by", "at"}`` while an operator has
                                               revoked the store's state: nodes that apply
                                               such a version refuse writes (503)
``policy_nodes``                      hash     ``<proxy>/<pid>`` -> the policy version that
                                               worker enforces (``iostack.policy.reader``)
``actors``                            hash     policy id -> its actor's state JSON
``qos``                               hash     bandwidth scope -> SLO, assigned vs achieved
``qos:bucket:<direction>:<scope>``    hash     the scope's shared token bucket (``tokens``,
                                               ``stamp``, ``lessee:<worker>``; see
                                               ``iostack.swift_middleware.shared_bucket``)
``history``                           list     policy changes, version = index (``history``)
``history:policies``                  hash     policy id -> its record as submitted (kept)
``actor_events``                      list     actors' enforce/revert events, newest first
``ui:session:<sha256>``               string   a console login (token, account), with a TTL
``invalidate``                        channel  pub/sub: the new version after each change
``cache:invalidate``                  channel  pub/sub: object paths written through a proxy
                                               (the proxy cache drops them; see
                                               ``iostack.swift_middleware.cache.invalidation``)
====================================  =======  ==========================================

Levels are ``global`` (target ``*``), ``group``, ``tenant`` (an account),
``container`` (``account/container``, or ``*/container`` for any account),
``object`` (``account/container/object``), ``volume`` and ``storage_group``.
"""

from __future__ import annotations

DEFAULT_PREFIX = "iostack:"
LEVELS = ("global", "group", "tenant", "container", "object", "volume", "storage_group")


def glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern (a prefix may hold ``*?[]``)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class KeySpace:
    """Key names under one prefix."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        self.filters = prefix + "filters"
        self.metrics = prefix + "metrics"
        self.classes = prefix + "classes"
        self.groups = prefix + "groups"
        self.tenant_groups = prefix + "tenant_groups"
        self.object_types = prefix + "object_types"
        self.tenants = prefix + "tenants"
        self.tenant_names = prefix + "tenant_names"
        self.policies = prefix + "policies"
        self.policy_seq = prefix + "policy_seq"
        self.objrules = prefix + "objrules"
        self.version = prefix + "version"
        self.marker = prefix + "marker"
        self.revoked = prefix + "revoked"
        self.actors = prefix + "actors"
        self.policy_nodes = prefix + "policy_nodes"
        self.qos = prefix + "qos"
        self.invalidate = prefix + "invalidate"
        self.cache_invalidate = prefix + "cache:invalidate"
        self.history = prefix + "history"
        self.history_policies = prefix + "history:policies"
        self.actor_events = prefix + "actor_events"
        self.ui_sessions = prefix + "ui:session:"
        self.reconcile_progress = prefix + "reconcile:progress"

    def qos_bucket(self, direction: str, scope: str) -> str:
        return f"{self.prefix}qos:bucket:{direction}:{scope}"

    def rules(self, level: str, target: str) -> str:
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}")
        return f"{self.prefix}rules:{level}:{target}"
