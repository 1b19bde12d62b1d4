"""The cluster mode's private Redis: a master, two replicas and three Sentinels that fail over.

``Services`` with ``redis_sentinel`` (what ``aio start --nodes 3`` sets)
starts the set on loopback with a generated password and hands out a
``redis+sentinel://`` URL. Killing the master promotes a replica: a client
made once from that URL writes again within a bound measured here (and
printed); the next ``ensure`` (``aio start``) brings the killed server back
as a replica of the promoted master, and nothing written is lost. A master
hung past the Sentinels' patience is replaced too, and when it wakes up it
acknowledges no write to a client still connected to it (no replica in
sync with it: ``NOREPLICAS``, or ``READONLY`` once demoted).
"""

from __future__ import annotations

import time

import pytest
import redis

from iostack.aio.processes import ProcessManager
from iostack.aio.redis_set import DOWN_AFTER_MS, SENTINELS, SERVERS
from iostack.aio.services import Services, wait_until
from iostack.policy.connection import connect

pytestmark = pytest.mark.integration


@pytest.fixture
def services(tmp_path):
    services = Services(tmp_path, ProcessManager(tmp_path), timeout=30)
    services.redis_sentinel = True
    try:
        yield services
    finally:
        services.stop_private()
        assert not [n for n in (*SERVERS, *SENTINELS) if services.processes.find(n)]


def test_a_killed_master_is_replaced_and_comes_back_as_a_replica(services):
    info = services.ensure("redis", "")
    assert info.url.startswith("redis+sentinel://:") and set(info.members) == {
        *SERVERS, *SENTINELS}
    members = services.redis_set()
    conf = (services.state_dir / "etc" / "redis2.conf").read_text()
    assert "bind 127.0.0.1\n" in conf and f"requirepass {members.password}" in conf
    bare = redis.Redis("127.0.0.1", info.members["sentinel"], socket_timeout=1)
    with pytest.raises(redis.AuthenticationError):
        bare.ping()  # the Sentinels want the password too
    client = connect(info.url)
    client.set("k", "before")
    old = members.current_master()
    assert old == info.members["redis"]
    assert wait_until(lambda: client.execute_command("ROLE")[2] and
                      len(client.execute_command("ROLE")[2]) == 2, 15), "replicas never synced"

    killed = time.monotonic()
    services.processes.stop("redis")
    writable = None
    while time.monotonic() - killed < 30:
        try:
            client.set("k", "after")
            writable = time.monotonic() - killed
            break
        except redis.RedisError:
            time.sleep(0.1)
    print(f"\nmaster killed -> writes succeed again through the same client: {writable:.2f} s "
          f"(Sentinel down-after {DOWN_AFTER_MS} ms)")
    assert writable is not None, "no replica was promoted within 30 s"
    promoted = members.current_master()
    assert promoted != old

    # `aio start`: the killed server comes back, following the promoted master.
    assert services.ensure("redis", "").url == info.url
    back = redis.Redis("127.0.0.1", old, password=members.password, socket_timeout=1)
    assert wait_until(lambda: _get(back, "k") == b"after", 15), "the old master did not rejoin"
    assert back.execute_command("ROLE")[0] == b"slave"
    assert members.current_master() == promoted


def test_a_master_that_wakes_up_after_a_failover_takes_no_write(services):
    info = services.ensure("redis", "")
    members = services.redis_set()
    old = members.current_master()
    stale = redis.Redis("127.0.0.1", old, password=members.password, socket_timeout=10)
    stale.set("k", "before")
    pause = (DOWN_AFTER_MS + 3000) / 1000
    stale.execute_command("CLIENT", "PAUSE", str(int(pause * 1000)), "ALL")
    paused = time.monotonic()
    assert wait_until(lambda: members.current_master() not in (None, old), 15), \
        "the Sentinels did not replace the hung master"
    time.sleep(max(0.0, pause - (time.monotonic() - paused)))
    with pytest.raises(redis.ResponseError, match="NOREPLICAS|READONLY"):
        stale.set("k", "lost")  # the client still holds its connection to the old master
    client = connect(info.url)
    assert client.get("k") == b"before"
    client.set("k", "after")  # through the Sentinels: the promoted master
    assert wait_until(lambda: _get(stale, "k") == b"after", 15), "the old master did not rejoin"


def _get(client: redis.Redis, key: str) -> bytes | None:
    try:
        return client.get(key)
    except redis.RedisError:  # still booting, or syncing
        return None
