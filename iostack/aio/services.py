"""Redis, RabbitMQ and memcached for the all-in-one: use the configured one, or start our own.

For each service the configured URL is probed first; a server that answers
there is used as it is and never stopped by us. Otherwise a private instance
is started under the state dir on a free loopback port (the same port as last
time when it is still free), with generated credentials where the service has
any: Redis gets a ``requirepass``, RabbitMQ a generated ``iostack`` user (no
``guest``) and its own epmd, so that nothing of it outlives ``stop``. Which
URL was chosen, and whether we started it, is kept in ``etc/services.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from iostack.aio.processes import ProcessManager
from iostack.aio.secrets import generated_secret
from iostack.aio.state import write_private_json

SERVICES_FILE = "etc/services.json"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class ServiceError(RuntimeError):
    """A service did not come up; the message names it and its log file."""


@dataclass
class ServiceInfo:
    url: str
    private: bool  # started (and so stopped) by us
    port: int | None = None


def free_port(preferred: int | None = None, host: str = "127.0.0.1",
              avoid: frozenset[int] = frozenset()) -> int:
    """``preferred`` if nothing listens there, else a port the kernel says is free.

    Ports in ``avoid`` (configured for components not started yet) are never
    returned, however free they look now.
    """
    candidates = ([preferred] if preferred and preferred not in avoid else []) + [0] * 20
    for port in candidates:
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            chosen = sock.getsockname()[1]
        if chosen not in avoid:
            return chosen
    raise ServiceError("no free TCP port on loopback")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def amqp_answers(url: str) -> bool:
    import pika

    params = pika.URLParameters(url)
    params.socket_timeout = 2
    params.blocked_connection_timeout = 2
    params.connection_attempts = 1
    try:
        pika.BlockingConnection(params).close()
        return True
    except Exception:  # noqa: BLE001 - pika raises many unrelated types for "not there"
        return False


def memcached_answers(url: str) -> bool:
    host, _, port = url.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1) as sock:
            sock.sendall(b"version\r\n")
            return sock.recv(64).startswith(b"VERSION")
    except (OSError, ValueError):
        return False


class Services:
    """The backing services of one state dir."""

    def __init__(self, state_dir: Path, processes: ProcessManager, timeout: float,
                 reserved: frozenset[int] = frozenset()) -> None:
        """``reserved``: ports configured for the stack's other components."""
        self.state_dir = state_dir
        self.processes = processes
        self.timeout = timeout
        self.reserved = reserved
        self.path = state_dir / SERVICES_FILE
        self.info: dict[str, ServiceInfo] = {}
        if self.path.is_file():
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            self.info = {name: ServiceInfo(**value) for name, value in saved.items()}

    def _save(self) -> None:
        write_private_json(self.path, {name: asdict(info) for name, info in self.info.items()})

    def _previous_port(self, name: str) -> int | None:
        info = self.info.get(name)
        return info.port if info and info.private else None

    def ensure(self, name: str, configured_url: str) -> ServiceInfo:
        """Return a usable URL for ``name``: the configured one if it answers, else ours."""
        answers = {"redis": redis_answers, "rabbitmq": amqp_answers,
                   "memcached": memcached_answers}[name]
        previous = self.info.get(name)
        if previous and previous.private and self.processes.find(name) and answers(previous.url):
            return previous
        if answers(configured_url):
            info = ServiceInfo(url=configured_url, private=False)
        else:
            start = {"redis": self._start_redis, "rabbitmq": self._start_rabbitmq,
                     "memcached": self._start_memcached}[name]
            info = start()
        self.info[name] = info
        self._save()
        return info

    def stop_private(self) -> list[str]:
        """Stop the services we started; return their names."""
        stopped = []
        for name in ("rabbitmq", "epmd", "redis", "memcached"):
            if self.processes.stop(name):
                stopped.append(name)
        return stopped

    def _wait(self, name: str, check) -> None:
        if not wait_until(check, self.timeout, 0.2):
            self.processes.stop(name)
            raise ServiceError(
                f"{name} did not come up within {self.timeout:.0f}s; "
                f"see {self.processes.log_file(name)}"
            )

    def _require(self, program: str) -> str:
        path = shutil.which(program) or (program if os.access(program, os.X_OK) else None)
        if not path:
            raise ServiceError(f"{program} is not installed (run deploy/bootstrap.sh)")
        return path

    def _start_redis(self) -> ServiceInfo:
        binary = self._require("redis-server")
        port = free_port(self._previous_port("redis"), avoid=self.reserved)
        password = generated_secret(self.state_dir, "redis_password")
        data_dir = self.state_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.state_dir / "etc" / "redis.conf"
        conf.write_text(
            "\n".join([
                "bind 127.0.0.1", f"port {port}", "protected-mode yes", "daemonize no",
                f"dir {data_dir}", 'logfile ""', "appendonly yes", 'save ""',
                f"requirepass {password}", "",
            ]),
            encoding="utf-8",
        )
        conf.chmod(0o600)
        self.processes.start("redis", [binary, str(conf)])
        url = f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"
        self._wait("redis", lambda: redis_answers(url))
        return ServiceInfo(url=url, private=True, port=port)

    def _start_memcached(self) -> ServiceInfo:
        binary = self._require("memcached")
        port = free_port(self._previous_port("memcached"), avoid=self.reserved)
        argv = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]  # memcached refuses to run as root without it
        self.processes.start("memcached", argv)
        url = f"127.0.0.1:{port}"
        self._wait("memcached", lambda: memcached_answers(url))
        return ServiceInfo(url=url, private=True, port=port)

    def _start_rabbitmq(self) -> ServiceInfo:
        self._require(RABBITMQ_SERVER)
        epmd = self._require("epmd")
        base = self.state_dir / "rabbitmq"
        base.mkdir(parents=True, exist_ok=True)
        port = free_port(self._previous_port("rabbitmq"), avoid=self.reserved)
        epmd_port = free_port(avoid=self.reserved | {port})
        dist_port = free_port(avoid=self.reserved | {port, epmd_port})
        password = generated_secret(self.state_dir, "rabbitmq_password")
        conf = base / "rabbitmq.conf"
        conf.write_text(
            "\n".join([
                f"listeners.tcp.1 = 127.0.0.1:{port}",
                "default_user = iostack",
                f"default_pass = {password}",
                "default_vhost = /",
                "loopback_users = none",
                "log.console = true",
                "log.file = false",
                "",
            ]),
            encoding="utf-8",
        )
        conf.chmod(0o600)
        (base / "enabled_plugins").write_text("[].\n", encoding="utf-8")
        # Our own epmd on a private port, so nothing of ours outlives stop. One left from
        # a broker that died serves no one and listens on a port chosen then: replace it.
        self.processes.stop("epmd")
        self.processes.start("epmd", [epmd, "-port", str(epmd_port), "-address", "127.0.0.1"])
        self._wait("epmd", lambda: port_open("127.0.0.1", epmd_port))
        env = dict(os.environ)
        env.update({
            "HOME": str(base),  # the Erlang cookie lives there
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": "iostack@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_CONFIG_FILE": str(conf),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.processes.log_dir),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        })
        self.processes.start("rabbitmq", [RABBITMQ_SERVER], env=env, cwd=base)
        url = f"amqp://iostack:{quote(password, safe='')}@127.0.0.1:{port}/%2F"
        self._wait("rabbitmq", lambda: amqp_answers(url))
        return ServiceInfo(url=url, private=True, port=port)


def host_port(url: str) -> tuple[str, int]:
    """Host and port of a service URL; memcached's are plain ``host:port``."""
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    return parts.hostname or "127.0.0.1", parts.port or 0


def redact(url: str) -> str:
    """The URL without its password, for printing."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = f"{parts.username or ''}:***@{parts.netloc.rpartition('@')[2]}"
    return parts._replace(netloc=netloc).geturl()
