"""Redis, RabbitMQ and memcached for the all-in-one: private ones, or the operator's.

Redis holds the policies (and encryption parameters) and RabbitMQ carries
metrics and QoS assignments, so whoever can reach them unauthenticated can
delete rules, read keys or forge assignments. The all-in-one therefore uses
only servers it authenticates to:

- By default (no URL configured) it starts its own instance of each under the
  state dir, on a free loopback port (the same as last time when still free),
  with generated credentials: Redis gets a ``requirepass``, RabbitMQ a
  generated ``iostack`` user (no ``guest``) and its own epmd, so that nothing
  of it outlives ``stop``. Whatever answers on the well-known ports (6379,
  5672) is never used unless configured.
- An operator's URL (``IOSTACK_REDIS_URL=redis://:pw@host:port/0``,
  ``IOSTACK_AMQP_URL=amqp://user:pw@host:port/vhost``) is used as given. It
  must answer, carry credentials, and the server must enforce them: a Redis
  that also answers without a password, or a RabbitMQ that also takes the
  well-known ``guest``/``guest``, is refused with a message saying so, unless
  ``allow_unauthenticated_services`` is set; then the service is recorded as
  unauthenticated and ``iostack aio start`` and ``status`` warn about it.
- With ``redis_sentinel`` set (the cluster mode), the private Redis is a
  master with two replicas under three Sentinels (``iostack.aio.redis_set``)
  and its URL a ``redis+sentinel://`` one; a member that is not running is
  started again by the next ``ensure``.
- memcached (Swift's account/container info cache, and tempauth's tokens)
  has no authentication at all; a private one is started unless
  ``memcache_url`` names another, listening on a Unix socket only the stack's
  uid may open (``run/memcached.sock``, 0600; URL ``unix:<path>``), never on
  TCP, where every local user could dump it.

Which URL was chosen, whether we started it, and why it is unauthenticated if
it is, is kept in ``etc/services.json``. ``add_amqp_vhost`` gives a stack its
own vhost on a private broker (the test suite shares one broker per session
between its stacks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from iostack.aio.processes import ProcessManager
from iostack.aio.redis_set import SENTINELS, SERVERS, RedisSet, RedisSetError
from iostack.aio.saved import from_saved
from iostack.aio.secrets import generated_secret
from iostack.ports import free_port, port_open, wait_until
from iostack.private_files import private_dir, write_private_json, write_private_text
from iostack.service_probes import (
    UNIX_MEMCACHE,
    amqp_answers,
    amqp_open_door,
    memcached_answers,
    redact,
    redis_answers,
    redis_open_door,
)

SERVICES_FILE = "etc/services.json"
RABBITMQ_ENV_FILE = "rabbitmq/env.json"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
RABBITMQ_NODE = "iostack@localhost"
RABBITMQ_USER = "iostack"


# The private servers' process names, in stop order (Sentinels before the servers they
# watch, so stopping is not taken for a failure to fail over).
PRIVATE_SERVERS = ("rabbitmq", "epmd", *SENTINELS, *SERVERS, "memcached")
# How each private server is started (``Services`` methods).
STARTERS = {"redis": "_start_redis", "rabbitmq": "_start_rabbitmq",
            "memcached": "_start_memcached"}


class ServiceError(RuntimeError):
    """A service did not come up; the message names it and its log file."""


@dataclass
class ServiceInfo:
    url: str
    private: bool  # started (and so stopped) by us
    port: int | None = None
    unauthenticated: str = ""  # why anyone may use it, when the operator allowed that
    members: dict[str, int] = field(default_factory=dict)  # a Redis set's process -> port


ANSWERS = {"redis": redis_answers, "rabbitmq": amqp_answers, "memcached": memcached_answers}
# memcached has no authentication to check (see the module docstring).
OPEN_DOOR = {"redis": redis_open_door, "rabbitmq": amqp_open_door}


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
        # Addresses besides loopback that a private RabbitMQ also listens on
        # (a cluster's storage nodes reach them on the root namespace's bridge address).
        self.listen_also: tuple[str, ...] = ()
        # A private Redis is a replicated set under Sentinel (the cluster mode).
        self.redis_sentinel = False
        self._starting: dict[str, Callable[[], bool]] = {}  # booting -> "does it answer?"
        if self.path.is_file():
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            self.info = {name: from_saved(ServiceInfo, value) for name, value in saved.items()}

    def _save(self) -> None:
        write_private_json(self.path, {name: asdict(info) for name, info in self.info.items()})

    def _previous_port(self, name: str) -> int | None:
        info = self.info.get(name)
        return info.port if info and info.private else None

    def ensure(self, name: str, configured_url: str, allow_unauthenticated: bool = False,
               wait: bool = True) -> ServiceInfo:
        """A usable URL for ``name``: the configured one if it is safe to use, else ours.

        Raises ``ServiceError`` for a configured URL that does not answer, or
        that anyone could use without credentials (unless that is allowed).
        With ``wait=False`` a private server we start may still be booting on
        return (its URL is already fixed); ``wait_started`` waits for it, so
        a slow one (RabbitMQ takes seconds) boots while the caller starts
        other things.
        """
        if configured_url:
            info = self._external(name, configured_url, allow_unauthenticated)
        else:
            previous = self.info.get(name)
            if (previous and previous.private and self._running(name)
                    and ANSWERS[name](previous.url)):
                return previous
            info = self._start(name)
        self.info[name] = info
        self._save()
        if wait:
            self.wait_started()  # may start it again on new ports
        return self.info[name]

    def wait_started(self) -> None:
        """Wait until every private server started by ``ensure`` answers.

        A server that exits while booting is started once more, on fresh
        ports: RabbitMQ has been seen to exit during boot on a loaded machine
        right after another broker stopped. Its first log is kept beside the
        new one (``<name>.log.failed``)."""
        while self._starting:
            name, check = self._starting.popitem()
            try:
                self._wait(name, check)
            except ServiceError:
                if name not in STARTERS:
                    raise
                log = self.processes.log_file(name)
                if log.exists():
                    log.replace(log.with_name(log.name + ".failed"))
                for member in self._members(name):
                    self.processes.stop(member)
                self.info[name] = self._start(name)
                self._save()
                self._wait(name, self._starting.pop(name))

    def _start(self, name: str) -> ServiceInfo:
        return getattr(self, STARTERS[name])()

    def _members(self, name: str) -> tuple[str, ...]:
        """The processes of private service ``name``."""
        return (*SERVERS, *SENTINELS) if name == "redis" and self.redis_sentinel else (name,)

    def _running(self, name: str) -> bool:
        return all(self.processes.find(member) for member in self._members(name))

    def _external(self, name: str, url: str, allow_unauthenticated: bool) -> ServiceInfo:
        if not ANSWERS[name](url):
            raise ServiceError(f"{name} at {redact(url)} does not answer or refuses the "
                               "URL's credentials")
        reason = OPEN_DOOR[name](url) if name in OPEN_DOOR else None
        if reason and not allow_unauthenticated:
            setting = {"redis": "IOSTACK_REDIS_URL", "rabbitmq": "IOSTACK_AMQP_URL"}[name]
            raise ServiceError(
                f"refusing {name} at {redact(url)}: {reason}, so any local process could "
                f"read and change what the stack keeps there. Give {setting} with "
                "credentials the server enforces, leave it unset to start a private "
                f"{name}, or pass --allow-unauthenticated-services to use it anyway"
            )
        return ServiceInfo(url=url, private=False, unauthenticated=reason or "")

    def warnings(self) -> list[str]:
        """One loud line per service the stack uses although anyone may use it."""
        return [f"WARNING: {name} at {redact(info.url)} is unauthenticated "
                f"({info.unauthenticated}): any local process can read and change the "
                "stack's policies, keys and metrics"
                for name, info in sorted(self.info.items()) if info.unauthenticated]

    def add_amqp_vhost(self, vhost: str) -> str:
        """Create ``vhost`` on our private broker for our user; return its AMQP URL.

        Stacks sharing one broker (the test suite's) each get their own vhost,
        so none sees another's exchanges and queues.
        """
        self.import_amqp_definitions({
            "vhosts": [{"name": vhost}],
            "permissions": [{"user": RABBITMQ_USER, "vhost": vhost, "configure": ".*",
                             "write": ".*", "read": ".*"}],
        })
        parts = urlsplit(self.info["rabbitmq"].url)
        return parts._replace(path="/" + quote(vhost, safe="")).geturl()

    def import_amqp_definitions(self, definitions: dict[str, Any]) -> None:
        """Add users, vhosts and permissions (RabbitMQ's definitions format) to our broker."""
        info = self.info.get("rabbitmq")
        if not (info and info.private and self.processes.find("rabbitmq")):
            raise ServiceError("no private RabbitMQ is running in this state dir")
        self.wait_started()
        path = self.state_dir / "rabbitmq" / f"definitions-{uuid.uuid4().hex}.json"
        write_private_json(path, definitions)
        try:
            ctl = subprocess.run(  # noqa: S603 - fixed argv
                [self._require(RABBITMQCTL), "-q", "-n", RABBITMQ_NODE, "import_definitions",
                 str(path)],
                env=self._rabbitmq_env(), capture_output=True, text=True,
                timeout=self.timeout, check=False,
            )
        finally:
            path.unlink()
        if ctl.returncode != 0:
            raise ServiceError(f"rabbitmqctl import_definitions failed: {ctl.stderr.strip()}")

    def stop_private(self) -> list[str]:
        """Stop the services we started; return their names."""
        stopped = []
        for name in PRIVATE_SERVERS:
            if self.processes.stop(name):
                stopped.append(name)
        return stopped

    def _wait(self, name: str, check: Callable[[], bool]) -> None:
        def alive_and_ready() -> bool:
            for member in self._members(name):
                if self.processes.find(member) is None:
                    raise ServiceError(f"{member} exited during start-up; "
                                       f"see {self.processes.log_file(member)}")
            return check()

        if not wait_until(alive_and_ready, self.timeout, 0.2):
            for member in self._members(name):
                self.processes.stop(member)
            raise ServiceError(
                f"{name} did not come up within {self.timeout:.0f}s; "
                f"see {self.processes.log_file(name)}"
            )

    def _require(self, program: str) -> str:
        path = shutil.which(program) or (program if os.access(program, os.X_OK) else None)
        if not path:
            raise ServiceError(f"{program} is not installed (run deploy/bootstrap.sh)")
        return path

    def redis_set(self) -> RedisSet:
        """The private Redis set of the cluster mode, its members on their ports (kept
        across restarts while free)."""
        previous = self.info.get("redis")
        ports = dict(previous.members) if previous and previous.private else {}
        taken = set(self.reserved)
        for name in (*SERVERS, *SENTINELS):
            running = self.processes.find(name) and ports.get(name)
            ports[name] = running or free_port(ports.get(name), avoid=frozenset(taken))
            taken.add(ports[name])
        return RedisSet(self.state_dir, self.processes,
                        generated_secret(self.state_dir, "redis_password"), ports)

    def _start_redis(self) -> ServiceInfo:
        if self.redis_sentinel:
            members = self.redis_set()
            try:
                members.start()
            except RedisSetError as exc:
                raise ServiceError(str(exc)) from None
            self._starting["redis"] = members.ready
            return ServiceInfo(url=members.url, private=True, members=members.ports)
        binary = self._require("redis-server")
        port = free_port(self._previous_port("redis"), avoid=self.reserved)
        password = generated_secret(self.state_dir, "redis_password")
        data_dir = self.state_dir / "redis"
        private_dir(data_dir)
        conf = self.state_dir / "etc" / "redis.conf"
        write_private_text(conf, "\n".join([
            "bind 127.0.0.1", f"port {port}", "protected-mode yes", "daemonize no",
            f"dir {data_dir}", 'logfile ""', "appendonly yes", 'save ""',
            f"requirepass {password}", "",
        ]))
        self.processes.start("redis", [binary, str(conf)])
        url = f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"
        self._starting["redis"] = lambda: redis_answers(url)
        return ServiceInfo(url=url, private=True, port=port)

    def _start_memcached(self) -> ServiceInfo:
        """memcached on a Unix socket (mode 0600 in the 0700 ``run/``), no TCP at all:
        it has no authentication, and holds live tokens and cached ACLs. Swift's
        servers reach it through ``iostack_memcache`` (``unix:<path>``); storage
        nodes in network namespaces share the filesystem, so they reach it too."""
        binary = self._require("memcached")
        private_dir(self.processes.run_dir)
        path = self.processes.run_dir / "memcached.sock"
        path.unlink(missing_ok=True)
        argv = [binary, "-s", str(path), "-a", "0600", "-m", "64"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]  # memcached refuses to run as root without it
        self.processes.start("memcached", argv)
        url = f"{UNIX_MEMCACHE}{path}"
        self._starting["memcached"] = lambda: memcached_answers(url)
        return ServiceInfo(url=url, private=True, port=0)

    def _rabbitmq_env(self) -> dict[str, str]:
        """The environment our broker runs in, for it and for ``rabbitmqctl``."""
        saved = json.loads((self.state_dir / RABBITMQ_ENV_FILE).read_text(encoding="utf-8"))
        return {**os.environ, **saved}

    def _start_rabbitmq(self) -> ServiceInfo:
        self._require(RABBITMQ_SERVER)
        epmd = self._require("epmd")
        base = self.state_dir / "rabbitmq"
        private_dir(base)
        port = free_port(self._previous_port("rabbitmq"), avoid=self.reserved)
        epmd_port = free_port(avoid=self.reserved | {port})
        dist_port = free_port(avoid=self.reserved | {port, epmd_port})
        password = generated_secret(self.state_dir, "rabbitmq_password")
        conf = base / "rabbitmq.conf"
        write_private_text(conf, "\n".join([
            *(f"listeners.tcp.{i} = {host}:{port}"
              for i, host in enumerate(("127.0.0.1", *self.listen_also), 1)),
            f"default_user = {RABBITMQ_USER}",
            f"default_pass = {password}",
            "default_vhost = /",
            "loopback_users = none",
            "log.console = true",
            "log.file = false",
            "",
        ]))
        write_private_text(base / "enabled_plugins", "[].\n")
        # Our own epmd on a private port, so nothing of ours outlives stop. One left from
        # a broker that died serves no one and listens on a port chosen then: replace it.
        self.processes.stop("epmd")
        self.processes.start("epmd", [epmd, "-port", str(epmd_port), "-address", "127.0.0.1"])
        self._wait("epmd", lambda: port_open("127.0.0.1", epmd_port))
        write_private_json(self.state_dir / RABBITMQ_ENV_FILE, {
            "HOME": str(base),  # the Erlang cookie lives there
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": RABBITMQ_NODE,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            # Erlang distribution (the broker's and rabbitmqctl's) listens on every
            # interface unless told: loopback only, as the CLI is all that uses it.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": _LOOPBACK_DIST,
            "RABBITMQ_CTL_ERL_ARGS": _LOOPBACK_DIST,
            "RABBITMQ_CONFIG_FILE": str(conf),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.processes.log_dir),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        })
        self.processes.start("rabbitmq", [RABBITMQ_SERVER], env=self._rabbitmq_env(), cwd=base)
        url = f"amqp://{RABBITMQ_USER}:{quote(password, safe='')}@127.0.0.1:{port}/%2F"
        self._starting["rabbitmq"] = lambda: amqp_answers(url)
        return ServiceInfo(url=url, private=True, port=port)


_LOOPBACK_DIST = "-kernel inet_dist_use_interface {127,0,0,1}"


def host_port(url: str) -> tuple[str, int]:
    """Host and port of a service URL; memcached's are plain ``host:port``."""
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    return parts.hostname or "127.0.0.1", parts.port or 0
