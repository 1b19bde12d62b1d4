"""Settings of one all-in-one stack.

Every setting has a default, can be set in the environment
(``IOSTACK_<NAME>``, e.g. ``IOSTACK_PROXY_PORT=8081``) or on the command line
(``iostack aio start --proxy-port 8081``). The values a stack was started
with are saved in ``<state dir>/etc/aio-config.json`` so that a later
``start`` (after a reboot, say) keeps the same ports and URLs.

``redis_url``, ``amqp_url`` and ``memcache_url`` are empty by default: the
all-in-one then starts private servers with generated credentials on free
loopback ports under the state dir (see ``iostack.aio.services``). A URL the
operator gives is used as given, and must carry credentials the server
enforces unless ``--allow-unauthenticated-services`` is passed. That flag
counts for one ``start`` only: it is never saved, so each start that uses an
unauthenticated service has to ask for it again.
``namespace`` keeps stacks that share those servers apart: it prefixes every
Redis key (``<namespace>:``) and names the RabbitMQ exchanges
(``<namespace>.metrics`` ...), so a test stack never sees another stack's
policies or metrics.

``nodes`` above 1 makes the stack a cluster (``iostack.aio.cluster``): that
many storage nodes, each in a network namespace of its own, with three
replicas over three zones, and two proxies unless ``proxies`` is given.
``proxy_workers`` is the number of worker processes of each proxy (0: ``workers``).
``device_fs`` is ``xfs`` (loopback images, as Swift's SAIO has them: see
``iostack.aio.devices``), ``dir`` (Swift's devices are directories) or ``auto``
(the default: XFS where the host allows it, and where no device holds objects
as a directory yet; a cluster's nodes keep directories).
``auth`` is ``tempauth`` (the light default) or ``keystone``: a real Keystone
on ``keystone_port`` (``iostack.aio.keystone``) and the proxy pipeline
OpenStack clouds run (``s3token``, ``authtoken``, ``keystoneauth``).
``sandbox`` is the Storlets sandbox runtime: ``bubblewrap`` (the default) or
``docker``: Storlets' docker gateway (``iostack.storlet_runtime.host.docker_gateway``)
against a Podman service the stack starts and owns (``iostack.aio.podman_engine``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from iostack.aio.devices import DEVICE_FILESYSTEMS
from iostack.private_files import private_dir, write_private_json

CONFIG_FILE = "etc/aio-config.json"
NOT_SAVED = frozenset({"allow_unauthenticated_services"})
# Defaults of earlier versions, saved in aio-config.json by every start: they were never the
# operator's choice, and they point at whatever answers on the well-known ports.
FORMER_DEFAULTS = {
    "memcache_url": "127.0.0.1:11211",
    "redis_url": "redis://127.0.0.1:6379/0",
    "amqp_url": "amqp://guest:guest@127.0.0.1:5672/%2F",
    "device_fs": "dir",  # a state dir whose devices hold objects keeps them: devices._auto
}


@dataclass
class AioConfig:
    state_dir: Path
    host: str = "127.0.0.1"
    proxy_port: int = 8080
    proxy2_port: int = 8081  # the second proxy, with proxies = 2
    proxies: int = 1  # proxy servers (1 or 2), same config, on proxy_port and proxy2_port
    object_port: int = 6200
    container_port: int = 6201
    account_port: int = 6202
    controller_port: int = 9090
    block_port: int = 18700  # block bridge JSON-RPC
    keystone_port: int = 5000  # Keystone's identity API (with auth = keystone)
    iscsi_port: int = 3260  # block bridge iSCSI portal (tgt)
    block_demo: int = 0  # 1: create a filtered demo volume ("demo", xor>bitrev, 64 MiB)
    block_backend: str = "tgt"  # "lio" on hosts with configfs/TCMU (production)
    # Devices (or directories) the block bridge may export besides <state dir>/block,
    # comma-separated; none by default, so no RPC caller can export the host's disks.
    block_devices: str = ""
    memcache_url: str = ""  # "": a private memcached
    redis_url: str = ""  # "": a private Redis; else redis://:password@host:port/db
    amqp_url: str = ""  # "": a private RabbitMQ; else amqp://user:password@host:port/vhost
    allow_unauthenticated_services: bool = False  # use a URL anyone could use (never saved)
    auth: str = "tempauth"  # or "keystone": a real Keystone, authtoken + keystoneauth + s3token
    keystone_venv: str = ""  # Keystone's virtualenv ("": <state dir>/openstack/keystone-venv)
    # Seconds a validated Keystone token stays cached (authtoken, controller): the window
    # in which a revoked token still works.
    token_cache_seconds: int = 300
    sandbox: str = "bubblewrap"  # or "docker": tenant filters in containers (a Podman service)
    namespace: str = "iostack"  # Redis key prefix and RabbitMQ exchange names of this stack
    metrics_interval: float = 1.0  # seconds per metric sample (proxies, object servers)
    actor_hold: float = 5.0  # seconds a TRANSIENT policy's condition stays false before revert
    qos_capacity_get: int = 0  # bytes/s the stack serves (0: unknown, only caps are enforced)
    qos_capacity_put: int = 0  # bytes/s the stack accepts
    replicas: int = 1
    workers: int = 1
    proxy_workers: int = 0  # worker processes of each proxy (0: ``workers``)
    nodes: int = 1  # storage nodes; 3 or more: a cluster in network namespaces
    device_fs: str = "auto"  # Swift's devices on XFS loopback images, or directories
    start_timeout: float = 60.0

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve()
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", self.namespace):
            raise ValueError(f"namespace must be 1-64 letters, digits, '_', '.' or '-', "
                             f"not {self.namespace!r}")
        if self.proxies not in (1, 2):
            raise ValueError(f"proxies must be 1 or 2, not {self.proxies}")
        if self.replicas not in (1, 2, 3):
            raise ValueError(f"replicas must be 1, 2 or 3, not {self.replicas}")
        if not (self.nodes == 1 or 3 <= self.nodes <= 9):
            raise ValueError(f"nodes must be 1 (all in one) or 3 to 9 (a cluster), "
                             f"not {self.nodes}")
        if self.device_fs not in DEVICE_FILESYSTEMS:
            raise ValueError(f"device_fs must be one of {', '.join(DEVICE_FILESYSTEMS)}, "
                             f"not {self.device_fs!r}")
        if self.device_fs == "auto" and self.nodes > 1:
            self.device_fs = "dir"
        if self.device_fs != "dir" and self.nodes > 1:
            raise ValueError("device_fs xfs is for the all-in-one; a cluster's nodes keep "
                             "directories")
        if self.auth not in ("tempauth", "keystone"):
            raise ValueError(f"auth must be tempauth or keystone, not {self.auth!r}")
        if self.sandbox not in ("bubblewrap", "docker"):
            raise ValueError(f"sandbox must be bubblewrap or docker, not {self.sandbox!r}")
        if self.sandbox == "docker" and self.nodes > 1:
            raise ValueError("sandbox docker is for the all-in-one; a cluster's nodes run "
                             "bubblewrap")
        if self.proxy_workers < 0 or self.workers < 1:
            raise ValueError("workers must be at least 1 and proxy_workers at least 0")

    @classmethod
    def settings(cls) -> list[str]:
        """Names of the settings that can be given (all but state_dir)."""
        return [f.name for f in fields(cls) if f.name != "state_dir"]

    @classmethod
    def is_flag(cls, name: str) -> bool:
        """Whether a setting is on/off (a command-line flag without a value)."""
        return {f.name: f.type for f in fields(cls)}[name] == "bool"

    @classmethod
    def load(cls, state_dir: Path, overrides: dict[str, Any] | None = None) -> AioConfig:
        """Defaults < saved config < environment < ``overrides`` (command line)."""
        values: dict[str, Any] = {}
        saved = Path(state_dir) / CONFIG_FILE
        if saved.is_file():
            values.update({name: value
                           for name, value in json.loads(saved.read_text(encoding="utf-8")).items()
                           if name not in NOT_SAVED and FORMER_DEFAULTS.get(name) != value})
        types = {f.name: f.type for f in fields(cls)}
        for name in cls.settings():
            env = os.environ.get(f"IOSTACK_{name.upper()}")
            if env is not None:
                values[name] = env
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        if int(values.get("nodes", 1)) > 1:
            values.setdefault("proxies", 2)  # a cluster has two proxies unless told otherwise
            values["replicas"] = 3  # one per zone
        for name, value in list(values.items()):
            if name not in types or name == "state_dir":
                values.pop(name)
            elif types[name] == "int":
                values[name] = int(value)
            elif types[name] == "float":
                values[name] = float(value)
            elif types[name] == "bool" and isinstance(value, str):
                values[name] = value.strip().lower() in ("1", "true", "yes", "on")
        return cls(state_dir=state_dir, **values)

    def save(self) -> None:
        path = self.state_dir / CONFIG_FILE
        data = {k: v for k, v in asdict(self).items() if k != "state_dir" and k not in NOT_SAVED}
        private_dir(path.parent)  # etc/: configs and secrets (the first write of a start)
        write_private_json(path, data)

    def ports(self) -> frozenset[int]:
        """The ports configured for the stack's own servers."""
        unused = {"proxy2_port"} if self.proxies < 2 else set()
        if self.auth != "keystone":
            unused.add("keystone_port")
        return frozenset(getattr(self, name) for name in self.settings()
                         if name.endswith("_port") and name not in unused)

    @property
    def cluster(self) -> bool:
        """Whether the storage nodes run in network namespaces of their own."""
        return self.nodes > 1

    @property
    def proxy_worker_count(self) -> int:
        return self.proxy_workers or self.workers

    @property
    def key_prefix(self) -> str:
        """The prefix of every Redis key of this stack."""
        return f"{self.namespace}:"

    @property
    def proxy_url(self) -> str:
        return f"http://{self.host}:{self.proxy_port}"

    @property
    def proxy_urls(self) -> list[str]:
        ports = [self.proxy_port, self.proxy2_port][:self.proxies]
        return [f"http://{self.host}:{port}" for port in ports]
