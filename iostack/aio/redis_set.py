"""Redis with replicas under Sentinel: the cluster mode's policy store.

A single Redis would be the cluster's one control-plane process whose loss
stops policy changes until someone restarts it. In the cluster mode
(``--nodes 3``) the all-in-one therefore starts, when no Redis URL is
configured, the smallest set Redis documents as highly available:

- three ``redis-server`` processes (``redis``, ``redis2``, ``redis3``): one
  master, two replicas (``replicaof``), each with its own data directory
  (``<state>/redis/<name>/``, ``appendonly yes``) and config
  (``<state>/etc/<name>.conf``);
- three Sentinels (``sentinel``, ``sentinel2``, ``sentinel3``; Debian's
  ``redis-sentinel``) monitoring the master as service ``iostack`` with a
  quorum of 2; a master that does not answer for ``DOWN_AFTER_MS`` is
  replaced by a replica (``FAILOVER_TIMEOUT_MS`` bounds one attempt).

A master takes writes only while at least one replica is in sync with it
(``min-replicas-to-write 1``, ``min-replicas-max-lag 5``): a master that
was cut off or hung while a replica was promoted, and comes back still
believing it is the master, refuses writes (``NOREPLICAS``) once its
replicas have left it, so a client that still holds a connection to it
rarely has a write acknowledged and then dropped at its demotion. Rarely,
not never: a master that wakes up before it notices its replicas left
still takes writes for a moment (seen in about half of the tries of a
hand-made test, so no test claims more). For policies the controller's
guardian covers that: a store found below the highest version it
journaled is restored from the journal.

The set counts as started when it can survive its master (``ready``): the
master takes writes, and every Sentinel knows both replicas and the other
two Sentinels. Sentinels learn replicas only from the master's ``INFO``
(every 10 s) and each other only through the master's and replicas'
``__sentinel__:hello`` channel; a master lost before that leaves Sentinels
with no replica to promote, and none can be learned from a dead master.

Every process binds 127.0.0.1 only (the storage nodes never talk to Redis)
and requires the stack's generated password (``redis_password``), servers
and Sentinels alike (``masterauth``, ``sentinel auth-pass``,
``sentinel sentinel-pass``). Every component is given the one URL

    redis+sentinel://:PASSWORD@127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/iostack/0

(``iostack.policy.connection``) and so follows a failover without a restart.

``start()`` starts the members that are not running and leaves the others
alone. A server started while others run joins the master the Sentinels
name (or, with no Sentinel up, the one that says it is master), unless it
is that master itself (restarted before a failover): so ``iostack aio
start`` after a killed master brings it back as a replica of the promoted
one. With nothing running, ``redis`` is the master, with its own data: a
version the others held beyond it (it was a lagging replica at the stop)
is caught by the controller's guardian, which restores its journal.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

import redis

from iostack.aio.processes import ProcessManager
from iostack.policy.connection import connect
from iostack.private_files import private_dir, write_private_text

SERVICE = "iostack"  # the Sentinels' name for the master
SERVERS = ("redis", "redis2", "redis3")
SENTINELS = ("sentinel", "sentinel2", "sentinel3")
QUORUM = 2
# A Sentinel whose clock jumps, or that was stalled for 2 s, stays in TILT mode
# for 30 s and acts on nothing; and it never promotes a replica whose link to
# the master has been down for longer than 10 x down-after plus the time since
# the master was judged down. With 3 s, a TILT while the master died left every
# replica ineligible for good (seen here: the VM's clock steps). 5 s keeps
# replicas eligible through a TILT (50 s > 30 s + 5 s).
DOWN_AFTER_MS = 5000
TILT_PERIOD_MS = 30000  # Sentinel's own constant
FAILOVER_TIMEOUT_MS = 10000
MIN_REPLICAS = 1  # in sync with the master, for it to take a write
MAX_LAG = 5  # s since a replica's last acknowledgement, for it to count as in sync
HOST = "127.0.0.1"


class RedisSetError(RuntimeError):
    """A member cannot be started (its program is missing)."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _program(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise RedisSetError(f"{name} is not installed (run deploy/bootstrap.sh)")
    return path


class RedisSet:
    """The servers and Sentinels of one state dir (see the module docstring)."""

    def __init__(self, state_dir: Path, processes: ProcessManager, password: str,
                 ports: dict[str, int]) -> None:
        """``ports``: every member's port (chosen by the caller, kept across restarts)."""
        self.state_dir = state_dir
        self.processes = processes
        self.password = password
        self.ports = ports

    @property
    def url(self) -> str:
        hosts = ",".join(f"{HOST}:{self.ports[name]}" for name in SENTINELS)
        return f"redis+sentinel://:{quote(self.password, safe='')}@{hosts}/{SERVICE}/0"

    def start(self) -> None:
        """Start every member that is not running (servers first, then Sentinels)."""
        master = self.current_master() or self.ports[SERVERS[0]]
        for name in SERVERS:
            if not self.processes.find(name):
                self._start_server(name, None if master == self.ports[name] else master)
        for name in SENTINELS:
            if not self.processes.find(name):
                self._start_sentinel(name, master)

    def ready(self) -> bool:
        """Whether the set would survive its master now: it takes writes, and every
        Sentinel could fail it over (see the module docstring)."""
        return self._writable() and all(self._can_fail_over(name) for name in SENTINELS)

    def _writable(self) -> bool:
        """Whether the master the Sentinels name answers and has ``MIN_REPLICAS`` in sync."""
        client = connect(self.url)
        try:
            replication = client.info("replication")
            return int(replication.get("min_slaves_good_slaves", 0)) >= MIN_REPLICAS
        except redis.RedisError:
            return False
        finally:
            client.close()

    def _can_fail_over(self, sentinel: str) -> bool:
        """Whether ``sentinel`` knows every replica and every other Sentinel."""
        state = self._master_state(sentinel)
        return state is not None and (int(state.get("num-slaves", 0)) >= len(SERVERS) - 1
                and int(state.get("num-other-sentinels", 0)) >= len(SENTINELS) - 1)

    def current_master(self) -> int | None:
        """The master's port as the running Sentinels say, else a running server; or None.

        Sentinels learn of a failover from its leader over the next seconds; until
        then one may still name the old master, flagged down. An answer without
        ``s_down``/``o_down`` is believed first (as redis-py's Sentinel client
        does), the newest (``config-epoch``) of them; only if every Sentinel
        sees its master down is the newest answer taken as it is.
        """
        answers = []  # (master not judged down, config epoch, port)
        for name in SENTINELS:
            state = self._master_state(name)
            if state and state.get("port", "").isdigit():
                flags = set(state.get("flags", "").split(","))
                answers.append((not flags & {"s_down", "o_down"},
                                int(state.get("config-epoch", 0)), int(state["port"])))
        if answers:
            return max(answers)[2]
        for name in SERVERS:
            if self.processes.find(name):
                try:
                    if self._client(name).execute_command("ROLE")[0] in (b"master", "master"):
                        return self.ports[name]
                except redis.RedisError:
                    continue
        return None

    def _master_state(self, sentinel: str) -> dict[str, str] | None:
        """What a running ``sentinel`` knows of the master (``SENTINEL MASTER``), or None."""
        if not self.processes.find(sentinel):
            return None
        try:
            fields = self._client(sentinel).execute_command("SENTINEL", "MASTER", SERVICE)
        except redis.RedisError:
            return None
        return {_text(k): _text(v) for k, v in zip(fields[::2], fields[1::2], strict=True)}

    def member_at(self, port: int) -> str:
        """The server's name listening on ``port`` (the tests find the master so)."""
        return next(name for name in SERVERS if self.ports[name] == port)

    def _client(self, name: str) -> redis.Redis:
        return redis.Redis(HOST, self.ports[name], password=self.password, socket_timeout=1,
                           socket_connect_timeout=1)

    def _start_server(self, name: str, replicaof: int | None) -> None:
        data = private_dir(self.state_dir / "redis" / name)
        conf = self.state_dir / "etc" / f"{name}.conf"
        write_private_text(conf, "\n".join([
            f"bind {HOST}", f"port {self.ports[name]}", "protected-mode yes",
            "daemonize no", f"dir {data}", 'logfile ""', "appendonly yes", 'save ""',
            f"requirepass {self.password}", f"masterauth {self.password}",
            "replica-serve-stale-data yes", f"min-replicas-to-write {MIN_REPLICAS}",
            f"min-replicas-max-lag {MAX_LAG}", "repl-diskless-sync-delay 1",
            *([f"replicaof {HOST} {replicaof}"] if replicaof else []), "",
        ]))
        self.processes.start(name, [_program("redis-server"), str(conf)])

    def _start_sentinel(self, name: str, master: int) -> None:
        # Sentinel rewrites its config (known replicas, Sentinels, epochs): a fresh
        # one per start, in a directory of its own.
        work = private_dir(self.state_dir / "redis" / name)
        conf = work / "sentinel.conf"
        write_private_text(conf, "\n".join([
            f"bind {HOST}", f"port {self.ports[name]}", "daemonize no", f"dir {work}",
            'logfile ""', f"requirepass {self.password}",
            f"sentinel sentinel-pass {self.password}",
            f"sentinel monitor {SERVICE} {HOST} {master} {QUORUM}",
            f"sentinel auth-pass {SERVICE} {self.password}",
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {SERVICE} 1", "",
        ]))
        self.processes.start(name, [_program("redis-sentinel"), str(conf)])
