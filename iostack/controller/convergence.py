"""Which policy version each proxy worker enforces, and who is behind.

Every proxy worker's policy reader reports the version it enforces to
``<prefix>policy_nodes`` (``iostack.policy.reader``): after each version it
applies, and every few seconds. ``policy_status`` compares those reports
with the store's version: a worker is **behind** when it enforces an older
version than the store holds, and **silent** when it has not reported for
``SILENT_AFTER`` seconds (stopped, or cut off from Redis: it still enforces
its copy, but nobody can tell which); the guardian forgets a worker silent
for ``FORGET_AFTER`` seconds. ``iostack policy status``,
``GET /v1/policies/status``, the console's Policies page and ``iostack
doctor`` show it; the guardian takes the highest version a worker reports
into account when it restores a store.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from iostack.policy.reader import REPORT_EVERY
from iostack.policy.redis_keys import KeySpace

SILENT_AFTER = 3 * REPORT_EVERY
FORGET_AFTER = 600.0  # seconds: a worker silent that long is gone (a restart's old pid)


def worker_reports(client: redis.Redis, keys: KeySpace) -> dict[str, dict[str, Any]]:
    """``<proxy>/<pid>`` -> what that worker last reported (unreadable entries left out)."""
    reports = {}
    for name, raw in client.hgetall(keys.policy_nodes).items():
        try:
            report = json.loads(raw)
        except ValueError:
            continue
        if isinstance(report, dict):
            reports[name.decode() if isinstance(name, bytes) else name] = report
    return reports


def forget_gone(client: redis.Redis, keys: KeySpace, reports: dict[str, dict[str, Any]],
                now: float | None = None) -> None:
    """Drop the reports of workers silent for ``FORGET_AFTER`` seconds."""
    now = time.time() if now is None else now
    gone = [name for name, report in reports.items()
            if now - float(report.get("reported") or 0) > FORGET_AFTER]
    if gone:
        client.hdel(keys.policy_nodes, *gone)


def policy_status(client: redis.Redis, keys: KeySpace, now: float | None = None
                  ) -> dict[str, Any]:
    """The store's version and, per proxy worker, the version it enforces and since when;
    ``revoked``: the operator's revocation record, None when the state stands."""
    now = time.time() if now is None else now
    version, revoked = client.mget(keys.version, keys.revoked)
    version = int(version or 0)
    workers = []
    for name, report in sorted(worker_reports(client, keys).items()):
        proxy, _, pid = name.rpartition("/")
        held = report.get("version")
        applied = report.get("applied")
        reported = float(report.get("reported") or 0)
        workers.append({
            "proxy": proxy, "pid": pid, "version": held,
            "age": round(now - applied, 1) if applied else None,
            "reported_ago": round(now - reported, 1),
            "silent": now - reported > SILENT_AFTER,
            "behind": held is None or held < version,
        })
    live = [w for w in workers if not w["silent"]]
    return {"version": version, "workers": workers,
            "behind": [f"{w['proxy']}/{w['pid']}" for w in live if w["behind"]],
            "silent": [f"{w['proxy']}/{w['pid']}" for w in workers if w["silent"]],
            "converged": bool(live) and not any(w["behind"] for w in live),
            "revoked": json.loads(revoked) if revoked else None}
