"""``/v1/monitoring``: every target's metrics in the last interval, the collector's
counters and the policy actors' states (what ``iostack metric watch`` shows)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from iostack.controller.api.base import control_loop, ctl, require_admin

bp = Blueprint("monitoring", __name__)


@bp.get("/monitoring")
def monitoring():
    require_admin()
    loop = control_loop()
    aggregator = loop.aggregator
    latest = aggregator.latest()
    metrics = sorted(ctl().registries.list("metrics"))
    targets = {}
    if latest is not None:
        targets = {name: {m: totals.value(m, latest.seconds) for m in metrics}
                   for name, totals in sorted(latest.targets().items())}
    return jsonify(
        interval=latest.start if latest else None, seconds=latest.seconds if latest else None,
        sources=aggregator.sources(), received=aggregator.received, late=aggregator.late,
        lost=aggregator.lost, connected=loop.consumer.connected.is_set(), targets=targets,
        actors=loop.actors.states())
