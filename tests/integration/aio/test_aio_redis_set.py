"""The cluster mode's private Redis: a master, two replicas and three Sentinels that fail over.

``Services`` with ``redis_sentinel`` (what ``aio start --nodes 3`` sets)
starts the set on loopback with a generated password and hands out a
``redis+sentinel://`` URL. Killing the master promotes a replica: a client
made once from that URL writes again within a bound measured here (and
printed); the next ``ensure`` (``aio start``) brings the killed server back
as a replica of the promoted master, and nothing written is lost.
"""

from __future__ import annotations

import time

import pytest
import redis

from iostack.aio.processes import ProcessManager
from iostack.aio.redis_set import (
    DOWN_AFTER_MS,
    FAILOVER_TIMEOUT_MS,
    SENTINELS,
    SERVERS,
    TILT_PERIOD_MS,
)
from iostack.aio.services import Services
from iostack.policy.connection import connect
from iostack.ports import wait_until

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

    # Down after DOWN_AFTER_MS, then an election; Sentinels whose votes split try
    # again after twice the failover timeout; a Sentinel that finds its clock
    # jumped (this VM's does) first sits out TILT_PERIOD_MS.
    bound = (TILT_PERIOD_MS + DOWN_AFTER_MS + 2 * FAILOVER_TIMEOUT_MS) / 1000
    killed = time.monotonic()
    services.processes.stop("redis")
    writable = None
    while time.monotonic() - killed < bound:
        try:
            client.set("k", "after")
            writable = time.monotonic() - killed
            break
        except redis.RedisError:
            time.sleep(0.1)
    assert writable is not None, f"no replica was promoted within {bound:g} s"
    print(f"\nmaster killed -> writes succeed again through the same client: {writable:.2f} s "
          f"(Sentinel down-after {DOWN_AFTER_MS} ms)")
    promoted = members.current_master()
    assert promoted != old

    # `aio start`: the killed server comes back, following the promoted master.
    assert services.ensure("redis", "").url == info.url
    back = redis.Redis("127.0.0.1", old, password=members.password, socket_timeout=1)
    assert wait_until(lambda: _get(back, "k") == b"after", 15), "the old master did not rejoin"
    assert back.execute_command("ROLE")[0] == b"slave"
    assert members.current_master() == promoted


def _get(client: redis.Redis, key: str) -> bytes | None:
    try:
        return client.get(key)
    except redis.RedisError:  # still booting, or syncing
        return None
