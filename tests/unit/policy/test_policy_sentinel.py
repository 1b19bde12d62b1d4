"""A Sentinel failover under the controller and a proxy's reader, with no restart.

A real master, replica and Sentinel (redis-server in sentinel mode), all on
loopback with a generated password. The controller's store and a reader
connect through ``redis+sentinel://``; the master is killed: the reader keeps
enforcing meanwhile, policy changes fail (503 material) until the replica is
promoted, then succeed again through the same clients, and reach the reader.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import Registries
from iostack.policy.connection import connect
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import RequestInfo
from iostack.ports import free_port, wait_until

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SERVICE = "iostack"


class Servers:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.password = secrets.token_hex(16)
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, lines: list[str], sentinel: bool = False) -> int:
        port = free_port()
        conf = self.root / f"{name}.conf"
        conf.write_text("\n".join([f"port {port}", "bind 127.0.0.1", 'save ""',
                                   f"dir {self.root}", f"requirepass {self.password}",
                                   *lines, ""]))
        self.processes[name] = subprocess.Popen(  # noqa: S603 - fixed argv
            [REDIS_SERVER, str(conf), *(["--sentinel"] if sentinel else [])],
            stdout=subprocess.DEVNULL)
        client = redis.Redis(port=port, password=self.password, socket_timeout=1)
        assert wait_until(lambda: _pings(client), 10), f"{name} did not start"
        return port

    def kill(self, name: str) -> None:
        self.processes.pop(name).kill()

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.terminate()
            process.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def sentinel_url(tmp_path):
    servers = Servers(tmp_path)
    master = servers.start("master", [f"masterauth {servers.password}"])
    servers.start("replica", [f"masterauth {servers.password}",
                              f"replicaof 127.0.0.1 {master}"])
    sentinel = servers.start("sentinel", [
        f"sentinel monitor {SERVICE} 127.0.0.1 {master} 1",
        f"sentinel auth-pass {SERVICE} {servers.password}",
        f"sentinel down-after-milliseconds {SERVICE} 500",
        f"sentinel failover-timeout {SERVICE} 5000"], sentinel=True)
    try:
        yield f"redis+sentinel://:{servers.password}@127.0.0.1:{sentinel}/{SERVICE}/0", servers
    finally:
        servers.stop_all()


def pipeline(reader: PolicyReader) -> list[str]:
    return [e.filter for e in reader.resolve(
        RequestInfo.from_path("PUT", "/v1/AUTH_t1/c/o")).pipeline]


def test_the_controller_and_a_reader_follow_a_failover_without_a_restart(sentinel_url):
    url, servers = sentinel_url
    keys = KeySpace("iostack:")
    client = connect(url, decode_responses=True)
    registries = Registries(client, keys)
    registries.seed()
    registries.add_tenant("t1")
    store = PolicyStore(client, keys, registries)
    store.submit("FOR TENANT t1 DO SET compression")
    reader = PolicyReader(url, prefix=keys.prefix, poll_interval=0.2)
    try:
        assert pipeline(reader) == ["compression"]
        # The replica has every change before the master goes.
        assert wait_until(lambda: client.execute_command("WAIT", 1, 1000) == 1, 10)
        servers.kill("master")
        killed = time.monotonic()
        assert pipeline(reader) == ["compression"]  # enforced meanwhile, from its copy
        refused = 0
        while True:
            try:
                store.submit("FOR CONTAINER t1/c DO SET encryption")
                break
            except redis.RedisError:
                refused += 1  # the API answers these 503 (no writable master)
                assert time.monotonic() - killed < 60, "no failover within 60 s"
                time.sleep(0.2)
        took = time.monotonic() - killed
        print(f"\npolicy changes succeed again {took:.1f} s after the master was killed "
              f"({refused} attempts refused meanwhile)")
        assert refused > 0  # the master was really gone
        assert wait_until(lambda: pipeline(reader) == ["compression", "encryption"], 10)
    finally:
        reader.close()
        client.close()
