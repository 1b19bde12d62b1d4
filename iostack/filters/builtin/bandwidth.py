"""``bandwidth``: per-tenant (or per-container) bandwidth and request-rate SLOs.

The paper's ``FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=30MBps``, written
``SET BANDWIDTH WITH get=30MBps, put=10MBps[, ops=100ops][, mode=max|min]``:

- ``mode=max`` (default): ``get``/``put`` cap the bytes per second of GET
  bodies sent and PUT bodies received, summed over every proxy; ``ops`` caps
  requests per second. A request over the ``ops`` limit waits up to ``wait``
  seconds for its turn, then gets 429 with Retry-After.
- ``mode=min``: ``get``/``put`` are guaranteed minimums: under contention the
  global controller gives the tenant at least that much of the configured
  capacity (other tenants are shaped to make room).
- ``share`` weighs the tenant when spare capacity is split max-min fairly
  (the QoS classes GOLD, SILVER and BRONZE are shares 4, 2 and 1).

The filter does not touch bodies: the QoS middleware
(``iostack.swift_middleware.qos``) shapes them with token buckets at the
rate the global controller (``iostack.controller.qos``) assigns to each
proxy. Limits set on a tenant (or a group, or everything) apply per tenant;
limits set on a container apply to that container.
"""

from __future__ import annotations

from typing import Any

from iostack.filters.base import FilterSpec
from iostack.filters.errors import ParamError
from iostack.filters.metadata import FilterMetadata, Param

METADATA = FilterMetadata(
    name="bandwidth",
    description=(
        "Bandwidth (GET/PUT bytes/s) and request-rate SLOs per tenant or container, summed "
        "over all proxies: caps (mode=max) or guaranteed minimums (mode=min), and a share of "
        "spare capacity; streams are shaped smoothly, requests over the ops limit wait, then "
        "get 429."
    ),
    params=(
        Param("get", "rate", default=0, minimum=0, unit="bytes/s",
              description="GET body bytes per second (0: none)"),
        Param("put", "rate", default=0, minimum=0, unit="bytes/s",
              description="PUT body bytes per second (0: none)"),
        Param("ops", "rate", default=0, minimum=0, unit="ops",
              description="requests per second, every method (0: none); always a cap"),
        Param("mode", "enum", default="max", choices=("max", "min"),
              description="get/put are caps (max) or guaranteed minimums (min)"),
        Param("wait", "duration", default=2, minimum=0, maximum=60, unit="s",
              description="how long a request over the ops limit may wait before 429"),
        Param("share", "float", default=1.0, minimum=0.01, maximum=1000,
              description="weight when spare capacity is split among tenants"),
    ),
    methods=frozenset({"GET", "PUT", "HEAD", "POST", "DELETE"}),
    stages=frozenset({"proxy"}),
)


def _check(params: dict[str, Any]) -> None:
    if params["mode"] == "min" and not (params["get"] or params["put"]):
        raise ParamError("bandwidth", "mode",
                         "mode=min needs get or put (the minimum to guarantee)")


SPEC = FilterSpec(METADATA, check_params=_check)

DIRECTIONS = ("get", "put", "ops")  # the rates a scope is shaped by


def scope_of(sources: list[dict[str, str]], account: str, container: str | None) -> str:
    """The scope a ``bandwidth`` pipeline entry limits, from the rules that set it.

    The container the most specific rule names when that rule is a
    container's (or an object's): the container the tenant wrote to, so an
    S3 multipart part stored in ``<bucket>+segments`` under the bucket's
    rule draws from the bucket's bucket, not a second one of its own; the
    tenant otherwise (tenant, group and global rules apply per tenant).
    """
    if not container or not sources or sources[-1].get("level") not in ("container", "object"):
        return account
    # Targets: container "AUTH_t1/logs" or "*/logs", object "AUTH_t1/logs/a.csv".
    parts = sources[-1].get("target", "").split("/", 2)
    named = parts[1] if len(parts) > 1 and parts[1] else container
    return f"{account}/{named}"
