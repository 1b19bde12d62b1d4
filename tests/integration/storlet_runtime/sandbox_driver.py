"""Runs in its own process (Storlets' runtime monkey-patches with eventlet on import).

``python sandbox_driver.py HOST_ROOT SCOPE GREENTHREADS START_AT HOLD``: at
wall-clock ``START_AT`` restart the scope's sandbox from GREENTHREADS
greenthreads at once, print JSON (how many real starts this process made, the
recorded pid, whether the agent answers), then keep the process (the
sandbox's parent, if it started it) alive for HOLD seconds.

``python sandbox_driver.py invoke HOST_ROOT SCOPE STORLET.py CONF_JSON``: run
the storlet once through the gateway (no Swift) on a small input and print
JSON: status ``ok`` with the output (and its largest piece as the server
would read it), or the error, and the elapsed seconds.

``python sandbox_driver.py serve HOST_ROOT SCOPE STORLET.py``: like a server
process, keep one process and run the storlet once per line read from stdin
(the line is the storlet's ``X-Timestamp``: a newer one is a re-upload);
each result also counts the status checks the gateway sent the daemon factory.
``DAEMON_RECHECK`` is 2 s here.
"""

import json
import logging
import sys
import time
from pathlib import Path

import eventlet
from storlets.gateway.common.file_manager import FileManager
from storlets.gateway.common.stob import StorletData

from iostack.storlet_runtime.host import gateway as bwrap_gateway
from iostack.storlet_runtime.host.deploy import check_python_storlet
from iostack.storlet_runtime.host.gateway import BwrapRunTimeSandbox, BwrapStorletGateway

CONF = {"sandbox_ping_interval": "0.05", "storlet_daemon_factory_debug_level": "ERROR"}


class LocalFiles(FileManager):
    """Serves the storlet file from disk instead of a Swift container."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get_storlet(self, name):
        return iter([self.path.read_bytes()]), None

    def get_dependency(self, name):
        raise FileNotFoundError(name)

    def put_log(self, name, fobj):
        pass


def invoke_once(host_root: str, scope: str, path: Path, conf: dict[str, str],
                timestamp: str = "1") -> dict:
    storlet = check_python_storlet(path.name, path.read_bytes())
    gateway = BwrapStorletGateway({"host_root": host_root, **CONF, **conf},
                                  logging.getLogger("driver"), scope)
    request = BwrapStorletGateway.request_class(
        path.name, {}, StorletData({}, data_iter=iter([b"input"])),
        options={"storlet_main": storlet.main, "storlet_language": "python",
                 "file_manager": LocalFiles(path), "storlet_x_timestamp": timestamp,
                 "storlet_content_length": str(path.stat().st_size)})
    start = time.monotonic()
    try:
        response = gateway.invocation_flow(request)
        pieces = list(response.data.data_iter)
        result = {"status": "ok", "body": b"".join(pieces).decode(),
                  "largest_piece": max(map(len, pieces), default=0)}
    except Exception as exc:  # noqa: BLE001 - report any failure to the test
        body = getattr(exc, "body", b"").decode()  # swob errors carry their message there
        result = {"status": "error", "error": f"{type(exc).__name__}: {exc} {body}"}
    return result | {"seconds": time.monotonic() - start}


def invoke(host_root: str, scope: str, storlet_path: str, conf_json: str) -> None:
    result = invoke_once(host_root, scope, Path(storlet_path), json.loads(conf_json))
    print(json.dumps(result), flush=True)


def serve(host_root: str, scope: str, storlet_path: str) -> None:
    bwrap_gateway.DAEMON_RECHECK = 2.0
    checks = []
    real_status = BwrapRunTimeSandbox._get_storlet_daemon_status

    def counting_status(self, storlet_id):
        checks.append(storlet_id)
        return real_status(self, storlet_id)

    BwrapRunTimeSandbox._get_storlet_daemon_status = counting_status
    for line in sys.stdin:
        checks.clear()
        result = invoke_once(host_root, scope, Path(storlet_path), {}, line.strip())
        print(json.dumps(result | {"status_checks": len(checks)}), flush=True)


def main() -> None:
    if sys.argv[1] == "invoke":
        invoke(*sys.argv[2:6])
        return
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:5])
        return
    host_root, scope, threads, start_at, hold = sys.argv[1:6]
    conf = {"host_root": host_root, **CONF}
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
