"""What the checker judges names against.

The vocabulary is plain data loaded from the registries (the controller reads
it from Redis on every check, so a filter or metric registered a moment ago is
known at once). Filters are keyed by lower-case name, metrics, classes and
object types by upper-case name; groups keep their case like tenants do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from iostack.filters.metadata import FilterMetadata
from iostack.monitoring.metric import Metric


@dataclass(frozen=True)
class QosClass:
    """A named bundle of actions, kept as the DSL text of the actions (``SET a, SET b ...``)."""

    name: str
    actions: str
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "actions": self.actions, "description": self.description}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QosClass:
        return cls(str(data["name"]).upper(), data["actions"], data.get("description", ""))


def filter_domain(meta: FilterMetadata) -> str:
    """``object`` (Swift) or ``block`` (volumes), from ``extra['domain']``."""
    return meta.extra.get("domain", "object")


@dataclass
class Vocabulary:
    filters: dict[str, FilterMetadata] = field(default_factory=dict)
    metrics: dict[str, Metric] = field(default_factory=dict)
    classes: dict[str, QosClass] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    object_types: dict[str, list[str]] = field(default_factory=dict)
    tenants: set[str] = field(default_factory=set)
    # Tenant names whose account is not <prefix><name> (Keystone: AUTH_<project id>).
    tenant_names: dict[str, str] = field(default_factory=dict)
    reseller_prefix: str = "AUTH_"
    # Per filter, the data path's own parameter check (rules across parameters that
    # metadata cannot express); it raises ValueError with the reason.
    validators: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)

    def account(self, tenant: str) -> str:
        """The Swift account of a tenant name as written (``t1`` -> ``AUTH_t1``, or the
        account recorded for that name, e.g. a Keystone project's)."""
        if tenant in self.tenant_names:
            return self.tenant_names[tenant]
        if tenant == "*" or not self.reseller_prefix or tenant.startswith(self.reseller_prefix):
            return tenant
        return self.reseller_prefix + tenant
