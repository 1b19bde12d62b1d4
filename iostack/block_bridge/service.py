"""The block bridge service: JSON-RPC 2.0 over HTTP, ``POST /targetrpc``.

    python -m iostack.block_bridge.service --config FILE

FILE is JSON:

    {"host": "127.0.0.1", "port": 18700,          # where the API listens
     "user": "admin", "password": "<secret>",     # HTTP basic auth (required)
     "state_dir": "/path",                        # volumes.json, FUSE mounts, logs
     "portal_host": "127.0.0.1", "portal_port": 3260,   # the tgt iSCSI portal
     "filter_dir": "/path/to/filters",            # default: the native build's
     "iqn_prefix": "iqn.2026-11.org.iostack",
     "chap_user": "iostack", "chap_password": "<secret>",   # CHAP for every target
     "initiators": ["iqn.2026-11.org.iostack:initiator.1a2b"],  # initiator ACL
     "allowed_devices": ["/dev/sdb", "/dev/vg0/"], # operator-listed devices (default: none)
     "rpc_timeout": 30, "rpc_connections": 16,    # per-connection idle timeout (s), cap
     "demo_volume": {"name": "demo", "size": 67108864, "filters": "xor(key=0x5a)>bitrev"},
     "controller_url": "http://127.0.0.1:9090", "controller_token": "<token>",
     "backend": "tgt"}                            # or "lio" on hosts with configfs/TCMU

user, password, state_dir, chap_user, chap_password and initiators are
required; ``write_config`` creates a file with generated credentials (mode
0600). There is no default password, and no target is open to initiators
outside ``initiators`` or without the CHAP pair (``access``).
Backing devices must be the files under ``<state_dir>/block-images`` or under
one of ``allowed_devices`` (devices or directories); nothing else
under ``/dev`` is allowed by default, so an RPC caller cannot export the
host's own disks, and nothing under ``<state_dir>/block`` (the bridge's own
state, keys included) ever is (``volumes``).

The API bounds what one client can hold: every connection's socket has a
``rpc_timeout`` (a client that stops sending or reading mid-request is
dropped after that many seconds), at most ``rpc_connections`` are served at
once (more wait in the listen backlog), bodies are at most 1 MiB
(``MAX_BODY``) and nested at most ``bounded_json.MAX_DEPTH`` levels.

Methods: create_filtered_volume {name, device|serial, [filters], [storage_group]}
(without ``filters`` the stack comes from the controller's VOLUME and
STORAGE_GROUP policies, see ``attach``; with no controller configured the
volume is plain), delete_filtered_volume {name},
list_filtered_volumes, create_storage_group {name, nodes, policy},
delete_storage_group {name}, list_storage_groups, and the initiator
methods of ``iostack.block_bridge.initiator`` (limited to this bridge's
own portal and targets). With the ``tgt`` backend the
service starts its own tgtd (private control port) and stops it, with every
FUSE frontend, on SIGTERM/SIGINT; with ``lio`` it runs tcmu-runner with
``handler_iostack.so`` and builds LIO targets through rtslib (``exporters``).
When it is ready it writes ``<state_dir>/block/service.json``
({url, user, pid}) for the all-in-one to pick up.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import threading
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from iostack.private_files import write_private_text

from .access import AccessError, IscsiAccess
from .attach import PolicyStacks, StorageGroups, with_group_limits
from .exporters import LioExporter, TgtFuseExporter
from .initiator import Initiator
from .native_lib import BUILD_DIR, default_filter_dir
from .rpc import Dispatcher
from .tgt import Tgtd
from .volumes import VolumeError, VolumeManager

DEFAULT_PORT = 18700
MAX_BODY = 1 << 20
log = logging.getLogger("iostack.block_bridge")


@dataclass
class ServiceConfig:
    user: str
    password: str
    state_dir: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    portal_host: str = "127.0.0.1"
    portal_port: int = 3260
    filter_dir: str = ""
    iqn_prefix: str = "iqn.2026-11.org.iostack"
    chap_user: str = ""
    chap_password: str = ""
    initiators: list[str] = field(default_factory=list)
    allowed_devices: list[str] = field(default_factory=list)
    demo_volume: dict[str, Any] | None = None
    controller_url: str = ""  # where VOLUME/STORAGE_GROUP policies are resolved
    controller_token: str = ""
    backend: str = "tgt"  # "tgt" (userspace, FUSE) | "lio" (kernel LIO + TCMU)
    rpc_timeout: float = 30.0  # seconds a connection may sit idle mid-request
    rpc_connections: int = 16  # connections served at once

    @classmethod
    def load(cls, path: Path) -> ServiceConfig:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        for key in ("user", "password", "state_dir"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ValueError(f"{path}: '{key}' is required (a non-empty string)")
        devices = data.get("allowed_devices", [])
        if not isinstance(devices, list) or not all(
                isinstance(d, str) and os.path.isabs(d) for d in devices):
            raise ValueError(f"{path}: 'allowed_devices' must be a list of absolute paths")
        for key in ("port", "portal_port"):
            if key in data and (not isinstance(data[key], int) or not 0 <= data[key] < 65536):
                raise ValueError(f"{path}: '{key}' must be a port number")
        timeout = data.get("rpc_timeout", cls.rpc_timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not 0 < timeout <= 3600:
            raise ValueError(f"{path}: 'rpc_timeout' must be seconds in (0, 3600]")
        connections = data.get("rpc_connections", cls.rpc_connections)
        if isinstance(connections, bool) or not isinstance(connections, int) \
                or not 0 < connections <= 1024:
            raise ValueError(f"{path}: 'rpc_connections' must be 1..1024")
        config = cls(**data)
        try:
            config.access()
        except (AccessError, TypeError) as exc:
            raise ValueError(f"{path}: {exc} (write_config generates chap_user, "
                             "chap_password and initiators)") from None
        return config

    def access(self) -> IscsiAccess:
        """Who may log in to this bridge's targets."""
        return IscsiAccess(self.chap_user, self.chap_password, tuple(self.initiators))


class BoundedHTTPServer(ThreadingHTTPServer):
    """Serves at most ``connections`` clients at once; one more is answered
    503 and closed at once rather than costing a thread."""

    BUSY_TEXT = b"too many connections; try again\n"
    BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (len(BUSY_TEXT), BUSY_TEXT))

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 connections: int) -> None:
        self.slots = threading.BoundedSemaphore(connections)
        super().__init__(address, handler)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        if self.slots.acquire(blocking=False):
            return super().process_request(request, client_address)
        # Answer, then read what the client sent until it closes (briefly): closing
        # with its request unread would reset the connection before it reads the 503.
        request.settimeout(0.2)
        with contextlib.suppress(OSError):
            request.sendall(self.BUSY)
            request.shutdown(socket.SHUT_WR)
            for _ in range(16):
                if not request.recv(4096):
                    break
        self.shutdown_request(request)
        return None

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def write_config(path: Path, state_dir: Path, **overrides: Any) -> ServiceConfig:
    """Create a config file with generated credentials (mode 0600)."""
    access = IscsiAccess.generate(overrides.get("iqn_prefix", ServiceConfig.iqn_prefix))
    generated = {"chap_user": access.chap_user, "chap_password": access.chap_password,
                 "initiators": list(access.initiators)}
    config = ServiceConfig(user="admin", password=secrets.token_urlsafe(18),
                           state_dir=str(state_dir), **(generated | overrides))
    write_private_text(Path(path), json.dumps(asdict(config), indent=1))
    return config


def make_exporter(config: ServiceConfig, block_dir: Path, filter_dir: Path):
    if config.backend == "tgt":
        tgtd = Tgtd(block_dir / "tgtd.log", config.access(), config.portal_host,
                    config.portal_port)
        return TgtFuseExporter(tgtd, block_dir, filter_dir)
    if config.backend == "lio":
        return LioExporter(block_dir / "tcmu", filter_dir, BUILD_DIR, config.portal_host,
                           config.portal_port, block_dir / "tcmu-runner.log", config.access())
    raise ValueError(f"backend must be 'tgt' or 'lio', not {config.backend!r}")


def _only(params: dict, allowed: set[str], method: str) -> None:
    unknown = set(params) - allowed
    if unknown:
        raise VolumeError("invalid", f"{method}: unknown parameters {sorted(unknown)}; "
                                     f"expected {sorted(allowed)}")


class BlockBridgeService:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.state_dir = Path(config.state_dir)
        self.block_dir = self.state_dir / "block"
        self.block_dir.mkdir(parents=True, exist_ok=True)
        filter_dir = Path(config.filter_dir or default_filter_dir())
        self.exporter = make_exporter(config, self.block_dir, filter_dir)
        self.volumes = VolumeManager(
            self.state_dir, self.exporter, filter_dir,
            config.iqn_prefix, config.allowed_devices)
        self.groups = StorageGroups(self.block_dir / "groups.json")
        self.policies = (PolicyStacks(config.controller_url, config.controller_token)
                         if config.controller_url else None)
        self.dispatcher = Dispatcher({
            "create_filtered_volume": self.create_filtered_volume,
            "delete_filtered_volume": self.delete_filtered_volume,
            "list_filtered_volumes": self.list_filtered_volumes,
            "create_storage_group": self.create_storage_group,
            "delete_storage_group": self.delete_storage_group,
            "list_storage_groups": self.list_storage_groups,
            **Initiator(config.portal_host, config.portal_port,
                        self.volumes.targets).methods(),
        })
        self.httpd: ThreadingHTTPServer | None = None

    # -- methods ------------------------------------------------------------

    def create_filtered_volume(self, params: dict) -> dict:
        _only(params, {"name", "device", "serial", "filters", "storage_group"},
              "create_filtered_volume")
        group = (self.groups.get(params["storage_group"]) if "storage_group" in params
                 else None)
        filters = params.get("filters")
        if filters is not None:
            filters = with_group_limits(group, filters)
        elif self.policies is None:  # no policy source: a plain volume, as Konnector does
            filters = with_group_limits(group, [])
        elif not isinstance(params.get("name"), str):
            raise VolumeError("invalid", "name must be a string")
        else:
            filters = self.policies.spec(params["name"], group)
        return self.volumes.create(params.get("name"), params.get("device"),
                                   params.get("serial"), filters)

    def create_storage_group(self, params: dict) -> dict:
        _only(params, {"name", "nodes", "policy"}, "create_storage_group")
        return self.groups.create(params).to_json()

    def delete_storage_group(self, params: dict) -> None:
        _only(params, {"name"}, "delete_storage_group")
        self.groups.delete(params.get("name"))

    def list_storage_groups(self, params: dict) -> list[dict]:
        _only(params, set(), "list_storage_groups")
        return self.groups.list()

    def delete_filtered_volume(self, params: dict) -> None:
        _only(params, {"name"}, "delete_filtered_volume")
        self.volumes.delete(params.get("name"))

    def list_filtered_volumes(self, params: dict) -> list[dict]:
        _only(params, set(), "list_filtered_volumes")
        return self.volumes.list()

    # -- lifecycle ----------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/targetrpc"

    def start(self) -> None:
        self.exporter.start()
        try:
            for problem in self.volumes.restore():
                log.warning("%s", problem)
            if self.config.demo_volume:
                self._demo_volume(self.config.demo_volume)
            self.httpd = BoundedHTTPServer((self.config.host, self.config.port),
                                           self._handler_class(), self.config.rpc_connections)
        except BaseException:
            self.volumes.shutdown()
            self.exporter.stop()
            raise
        threading.Thread(target=self.httpd.serve_forever, name="block-rpc", daemon=True).start()
        info = {"url": self.url, "user": self.config.user, "pid": os.getpid()}
        (self.block_dir / "service.json").write_text(json.dumps(info))
        log.info("block bridge API on %s (%s backend), iSCSI portal %s:%s", self.url,
                 self.config.backend, self.config.portal_host, self.config.portal_port)

    def _demo_volume(self, demo: dict) -> None:
        name = demo.get("name", "demo")
        if name in self.volumes.records:
            return
        backing = self.volumes.images / f"{name}.img"
        if not backing.exists():
            with open(backing, "wb") as f:
                f.truncate(int(demo.get("size", 64 << 20)))
        self.volumes.create(name, str(backing), None, demo.get("filters", "nop"))

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
        for problem in self.volumes.shutdown():
            log.warning("stopping: %s", problem)
        self.exporter.stop()
        (self.block_dir / "service.json").unlink(missing_ok=True)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        service = self
        expected = "Basic " + base64.b64encode(
            f"{self.config.user}:{self.config.password}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            timeout = service.config.rpc_timeout  # on the socket: reads and writes

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("%s " + fmt, self.address_string(), *args)

            def _reply(self, status: int, doc: Any = None, text: str = "") -> None:
                body = json.dumps(doc).encode() if doc is not None else text.encode()
                self.send_response(status)
                self.send_header("Content-Type",
                                 "application/json" if doc is not None else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="iostack-block"')
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._reply(405, text="use POST /targetrpc with a JSON-RPC 2.0 body\n")

            def do_POST(self) -> None:
                if self.path != "/targetrpc":
                    return self._reply(404, text=f"no such endpoint {self.path}; "
                                                 "use /targetrpc\n")
                auth = self.headers.get("Authorization", "")
                if not hmac.compare_digest(auth.encode(), expected.encode()):
                    return self._reply(401, text="authentication required\n")
                try:
                    length = int(self.headers.get("Content-Length", ""))
                except ValueError:
                    return self._reply(411, text="Content-Length required\n")
                if not 0 < length <= MAX_BODY:
                    return self._reply(413, text=f"body must be 1..{MAX_BODY} bytes\n")
                reply = service.dispatcher.handle(self.rfile.read(length))
                if reply is None:
                    return self._reply(204)
                self._reply(200, reply)

        return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iostack.block_bridge.service",
                                     description="IOStack block bridge JSON-RPC service")
    parser.add_argument("--config", required=True, type=Path, help="JSON config file")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(message)s")
    try:
        config = ServiceConfig.load(args.config)
    except (OSError, ValueError, TypeError) as exc:
        parser.exit(2, f"bad config: {exc}\n")
    service = BlockBridgeService(config)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service.start()
    print(f"block bridge listening on {service.url}", flush=True)
    try:
        stop.wait()
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
