"""``expiry``: objects are deleted a set time after they are written (lifecycle).

``SET EXPIRY WITH after=90d`` (a duration: ``90d``, ``12h``, ``30min``,
``45s``; at least one second, at most 100 years). The filter does not touch
bodies: Swift does the work. On every object PUT and POST the policy
applies to, the proxy middleware (``enforce.proxy``) sets ``X-Delete-At`` to
the write's time plus ``after`` (``delete_at``), so the object servers queue
the object for Swift's object-expirer, which deletes it when the time
comes (the all-in-one runs one). A tenant's own ``X-Delete-At`` or
``X-Delete-After`` that is sooner is kept; one that is later, or a POST
that would remove it (``X-Remove-Delete-At``), is brought back to the
policy's. A POST rewrites the object's metadata and counts as a write: it
restarts the clock, as Swift's own ``X-Delete-After`` on a POST does.
Objects stored before the policy get their ``X-Delete-At`` from a
``reconcile`` pass (counted from their Last-Modified).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iostack.filters.base import FilterSpec
from iostack.filters.errors import ParamError
from iostack.filters.metadata import FilterMetadata, Param

MAX_AFTER = 100 * 365 * 86400

METADATA = FilterMetadata(
    name="expiry",
    description=("Lifecycle: delete objects a set time after they are written (Swift's "
                 "X-Delete-At, carried out by its object-expirer)."),
    params=(
        Param("after", "duration", minimum=1, maximum=MAX_AFTER, unit="s",
              description="how long an object lives after its last write (e.g. 90d)"),
    ),
    methods=frozenset({"PUT", "POST"}),
    stages=frozenset({"proxy"}),
)


def _check(params: dict[str, Any]) -> None:
    if params.get("after") is None:
        raise ParamError("expiry", "after", "required: how long objects live, e.g. after=90d")


SPEC = FilterSpec(METADATA, check_params=_check)


def delete_at(params: Mapping[str, Any], written: float,
              tenant_delete_at: float | None = None) -> int:
    """The ``X-Delete-At`` of an object written at ``written`` under ``params``.

    The policy's time, or the tenant's own (``tenant_delete_at``) when sooner.
    """
    policy = int(written + float(params["after"]))
    return policy if tenant_delete_at is None else min(policy, int(tenant_delete_at))
