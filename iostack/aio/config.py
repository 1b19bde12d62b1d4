"""Settings of one all-in-one stack.

Every setting has a default, can be set in the environment
(``IOSTACK_<NAME>``, e.g. ``IOSTACK_PROXY_PORT=8081``) or on the command line
(``iostack aio start --proxy-port 8081``). The values a stack was started
with are saved in ``<state dir>/etc/aio-config.json`` so that a later
``start`` (after a reboot, say) keeps the same ports and URLs.

``redis_url`` and ``amqp_url`` name servers to *use if they answer*;
otherwise the all-in-one starts private ones on free ports under the state dir.
``namespace`` keeps stacks that share those servers apart: it prefixes every
Redis key (``<namespace>:``) and names the RabbitMQ exchanges
(``<namespace>.metrics`` ...), so a test stack never sees another stack's
policies or metrics.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

CONFIG_FILE = "etc/aio-config.json"


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
    iscsi_port: int = 3260  # block bridge iSCSI portal (tgt)
    block_demo: int = 0  # 1: create a filtered demo volume ("demo", xor>bitrev, 64 MiB)
    block_backend: str = "tgt"  # "lio" on hosts with configfs/TCMU (production)
    # Devices (or directories) the block bridge may export besides <state dir>/block,
    # comma-separated; none by default, so no RPC caller can export the host's disks.
    block_devices: str = ""
    memcache_url: str = "127.0.0.1:11211"
    redis_url: str = "redis://127.0.0.1:6379/0"
    # The stock local broker's loopback-only account; a private broker gets generated credentials.
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    namespace: str = "iostack"  # Redis key prefix and RabbitMQ exchange names of this stack
    metrics_interval: float = 1.0  # seconds per metric sample (proxies, object servers)
    actor_hold: float = 5.0  # seconds a TRANSIENT policy's condition stays false before revert
    qos_capacity_get: int = 0  # bytes/s the stack serves (0: unknown, only caps are enforced)
    qos_capacity_put: int = 0  # bytes/s the stack accepts
    replicas: int = 1
    workers: int = 1
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

    @classmethod
    def settings(cls) -> list[str]:
        """Names of the settings that can be given (all but state_dir)."""
        return [f.name for f in fields(cls) if f.name != "state_dir"]

    @classmethod
    def load(cls, state_dir: Path, overrides: dict[str, Any] | None = None) -> AioConfig:
        """Defaults < saved config < environment < ``overrides`` (command line)."""
        values: dict[str, Any] = {}
        saved = Path(state_dir) / CONFIG_FILE
        if saved.is_file():
            values.update(json.loads(saved.read_text(encoding="utf-8")))
        types = {f.name: f.type for f in fields(cls)}
        for name in cls.settings():
            env = os.environ.get(f"IOSTACK_{name.upper()}")
            if env is not None:
                values[name] = env
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        for name, value in list(values.items()):
            if name not in types or name == "state_dir":
                values.pop(name)
            elif types[name] == "int":
                values[name] = int(value)
            elif types[name] == "float":
                values[name] = float(value)
        return cls(state_dir=state_dir, **values)

    def save(self) -> None:
        path = self.state_dir / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if k != "state_dir"}
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    def ports(self) -> frozenset[int]:
        """The ports configured for the stack's own servers."""
        unused = {"proxy2_port"} if self.proxies < 2 else set()
        return frozenset(getattr(self, name) for name in self.settings()
                         if name.endswith("_port") and name not in unused)

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
