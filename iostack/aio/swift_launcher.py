"""Run one Swift server or daemon with its ``swift.conf`` read from a given directory.

Swift reads ``/etc/swift/swift.conf`` at import time (storage policies,
constraints, hash prefix); this launcher points it at the all-in-one's
directory first, then runs the server in the foreground with its log on
stderr (the process manager sends stderr to the component's log file).

    python -m iostack.aio.swift_launcher SWIFT_DIR CONF_FILE SECTION [once]

SECTION is a WSGI app section (``proxy-server``, ``object-server`` ...) or
one of the background daemons in ``DAEMONS``; ``once`` runs a daemon's pass
once and exits (``swift-object-replicator CONF once``).
"""

from __future__ import annotations

import importlib
import sys

DAEMONS = {
    "container-updater": "swift.container.updater:ContainerUpdater",
    "object-expirer": "swift.obj.expirer:ObjectExpirer",
    "object-replicator": "swift.obj.replicator:ObjectReplicator",
    "object-auditor": "swift.obj.auditor:ObjectAuditor",
    "object-updater": "swift.obj.updater:ObjectUpdater",
    "container-replicator": "swift.container.replicator:ContainerReplicator",
    "container-auditor": "swift.container.auditor:ContainerAuditor",
    "account-replicator": "swift.account.replicator:AccountReplicator",
    "account-auditor": "swift.account.auditor:AccountAuditor",
}


def main(argv: list[str]) -> int:
    swift_dir, conf_path, section, *mode = argv
    from swift.common import constraints, storage_policy, utils

    utils.set_swift_dir(swift_dir)
    constraints.reload_constraints()
    storage_policy.reload_storage_policies()

    if section in DAEMONS:
        from swift.common.daemon import run_daemon

        module, _, name = DAEMONS[section].partition(":")
        run_daemon(getattr(importlib.import_module(module), name), conf_path,
                   section_name=section, once=mode == ["once"], verbose=True)
        return 0

    from swift.common.wsgi import run_wsgi

    return run_wsgi(conf_path, section, verbose=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
