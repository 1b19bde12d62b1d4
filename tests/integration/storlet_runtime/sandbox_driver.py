"""Runs in its own process (Storlets' runtime monkey-patches with eventlet on import).

``python sandbox_driver.py HOST_ROOT SCOPE GREENTHREADS START_AT HOLD``: at
wall-clock ``START_AT`` restart the scope's sandbox from GREENTHREADS
greenthreads at once, print JSON (how many real starts this process made, the
recorded pid, whether the agent answers), then keep the process (the
sandbox's parent, if it started it) alive for HOLD seconds.
"""

import json
import logging
import sys
import time

import eventlet

from iostack.storlet_runtime.gateway import BwrapRunTimeSandbox


def main() -> None:
    host_root, scope, threads, start_at, hold = sys.argv[1:6]
    conf = {"host_root": host_root, "sandbox_ping_interval": "0.05",
            "storlet_daemon_factory_debug_level": "ERROR"}
    starts = []
    real_restart = BwrapRunTimeSandbox._restart

    def counting_restart(self, image):
        starts.append(time.time())
        real_restart(self, image)

    BwrapRunTimeSandbox._restart = counting_restart
    logger = logging.getLogger("driver")
    eventlet.sleep(max(0.0, float(start_at) - time.time()))
    pool = eventlet.GreenPool()
    for _ in range(int(threads)):
        pool.spawn_n(lambda: BwrapRunTimeSandbox(scope, conf, logger).restart())
    pool.waitall()
    sandbox = BwrapRunTimeSandbox(scope, conf, logger)
    print(json.dumps({"starts": len(starts), "pid": sandbox.process.running_pid(),
                      "ping": sandbox.ping()}), flush=True)
    eventlet.sleep(float(hold))


if __name__ == "__main__":
    main()
