"""Controller service entry point.

Started as ``python -m iostack.controller.server --config FILE`` (the
all-in-one does this). FILE is JSON:

- required: ``host``, ``port``, ``redis_url`` (may carry a password,
  ``redis://:pw@host:port/0``), ``amqp_url``, ``admin_token`` (16+ chars),
  ``state_dir`` (uploaded filter code goes under ``filter-code/``);
- optional: ``key_prefix`` (``iostack:``), ``reseller_prefix`` (``AUTH_``),
  ``max_body_bytes`` (1 MiB), ``keystone`` and ``swift_url`` (see
  ``auth``), ``auth_cache_seconds`` (60), ``tenants`` (names or accounts
  recorded as known at start, so policies on them raise no warning; or
  an object of name -> account, e.g. Keystone project name -> ``AUTH_<id>``,
  so that policies may name those tenants by name);
  ``namespace``, ``metrics_grace``, ``metrics_history``,
  ``actor_hold_seconds`` (see ``control_loop``).

On start it refills an emptied policy store from its journal
(``guardian``), seeds the built-in vocabulary into Redis (idempotent, keeps
administrator changes), starts the guardian's journal thread and the metric
loop (RabbitMQ consumer, aggregation, policy actors: ``control_loop``), then
serves the API with werkzeug's threaded WSGI server (no debugger, no
reloader) until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from iostack.controller.app import create_app
from iostack.controller.control_loop import ControlLoop
from iostack.controller.guardian import JOURNAL_FILE, StoreGuardian
from iostack.controller.registry import Registries

REQUIRED = ("host", "port", "redis_url", "amqp_url", "admin_token", "state_dir")
LOG = logging.getLogger("iostack.controller")


def load_config(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        raise SystemExit(f"{path}: missing config keys: {', '.join(missing)}")
    return config


def prepare_store(guardian: StoreGuardian, registries: Registries,
                  tenants: Iterable[str] | dict[str, str]) -> list[str]:
    """Make the policy store ready before serving; return the vocabulary entries added.

    An emptied store is refilled from the journal before seeding, so seeding
    never vouches for it; only a first set-up (no journal) is marked, and it
    is journaled at once.
    """
    first_setup = guardian.may_mark_new_store()
    if not first_setup:  # a new store has no marker yet: nothing was lost, say nothing
        guardian.restore_if_unmarked()
    added = registries.seed(mark=first_setup)
    for tenant in tenants:
        registries.add_tenant(tenant, tenants.get(tenant) if isinstance(tenants, dict) else None)
    guardian.tick()
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="IOStack controller")
    parser.add_argument("--config", required=True, help="JSON config file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = load_config(args.config)
    app = create_app(config)
    ctl = app.extensions["iostack"]
    guardian = StoreGuardian(ctl.redis, ctl.keys, Path(config["state_dir"]) / JOURNAL_FILE)
    registries = ctl.registries
    added = prepare_store(guardian, registries, config.get("tenants", ()))
    ctl.store.after_commit = registries.after_commit = guardian.journal_committed
    LOG.info("vocabulary seeded (%d new entries)", len(added))
    guardian.start()
    ctl.control_loop = ControlLoop(config, ctl.redis, ctl.keys, ctl.store, registries)
    ctl.control_loop.start()
    server = make_server(config["host"], int(config["port"]), app, threaded=True)

    def stop(signum, frame):
        # shutdown() waits for serve_forever to return: run it off the serving thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    LOG.info("controller listening on http://%s:%s", config["host"], server.server_port)
    server.serve_forever()
    ctl.control_loop.stop()
    guardian.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
