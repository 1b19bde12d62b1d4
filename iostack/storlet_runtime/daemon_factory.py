"""Storlets' daemon factory, starting Python storlets with ``daemon`` (the pre-forking daemon).

The sandbox's agent runs it in place of ``storlets.agent.daemon_factory``
(same arguments)::

    python3 -m iostack.storlet_runtime.daemon_factory SBUS_PATH LOG_LEVEL CONTAINER_ID

Everything is upstream's but the module a Python storlet daemon is started
from: ``iostack.storlet_runtime.daemon`` instead of ``storlets.agent.daemon``
(same arguments, same environment). Java storlets are started as upstream.
"""

from __future__ import annotations

import argparse
from typing import Any

from storlets.agent.daemon_factory.server import StorletDaemonFactory

from iostack.storlet_runtime.daemon import serve

UPSTREAM_DAEMON = "storlets.agent.daemon"
DAEMON_MODULE = "iostack.storlet_runtime.daemon"


class IOStackDaemonFactory(StorletDaemonFactory):
    def get_python_args(self, *args: Any, **kwargs: Any) -> tuple[list[str], dict[str, str]]:
        pargs, env = super().get_python_args(*args, **kwargs)
        return [DAEMON_MODULE if arg == UPSTREAM_DAEMON else arg for arg in pargs], env


def main() -> None:
    parser = argparse.ArgumentParser(description="Factory of storlet daemons")
    for arg in ("sbus_path", "log_level", "container_id"):
        parser.add_argument(arg)
    opts = parser.parse_args()
    serve(lambda logger: IOStackDaemonFactory(opts.sbus_path, logger, opts.container_id),
          "daemon-factory", opts.log_level, opts.container_id)


if __name__ == "__main__":
    main()
