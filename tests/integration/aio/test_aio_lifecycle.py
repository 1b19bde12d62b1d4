"""`iostack aio` on a machine with no Redis, RabbitMQ or memcached: it starts its own.

Runs a second, private all-in-one in a temporary state dir, on free ports, with
the configured service URLs pointing at closed ports, the way a fresh machine
looks to it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pika
import pytest
import redis
import requests
import swiftclient

from iostack.aio.processes import ProcessManager
from iostack.aio.session import PORT_SETTINGS, aio_command, free_port_args
from iostack.block_bridge.native_lib import BUILD_DIR

pytestmark = pytest.mark.integration

EXPECTED = {"account", "container", "object", "proxy", "container-updater", "controller",
            "block-bridge", "memcached", "redis", "rabbitmq", "epmd"}


def ports_args() -> list[str]:
    names = (*PORT_SETTINGS, "redis", "amqp", "memcache")
    ports = dict(zip(names, free_port_args(names)[1::2], strict=True))
    args = [arg for name in PORT_SETTINGS for arg in (f"--{name}-port", ports[name])]
    # Nothing listens on these: the stack must start private services.
    return args + ["--redis-url", f"redis://127.0.0.1:{ports['redis']}/0",
                   "--amqp-url", f"amqp://guest:guest@127.0.0.1:{ports['amqp']}/%2F",
                   "--memcache-url", f"127.0.0.1:{ports['memcache']}"]


def live_pids(state_dir: Path) -> dict[str, int]:
    manager = ProcessManager(state_dir)
    return {name: proc.pid for name in manager.names() if (proc := manager.find(name))}


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_private_services_start_stop_and_restart(tmp_path):
    state_dir = tmp_path / "aio"
    args = ports_args()
    started = aio_command("start", state_dir, "--json", "--replicas", "3", "--block-demo", "1",
                          *args)
    assert started.returncode == 0, started.stderr
    try:
        info = json.loads(started.stdout)
        # Three replicas over three devices: one PUT leaves three copies on disk.
        t1 = info["tenants"]["t1"]
        conn = swiftclient.Connection(authurl=info["auth_url"], user=t1["user"], key=t1["key"])
        conn.put_container("c")
        conn.put_object("c", "o", b"three copies")
        assert conn.get_object("c", "o")[1] == b"three copies"
        copies = list((state_dir / "srv" / "node").glob("d*/objects/*/*/*/*.data"))
        assert len({p.parts[-6] for p in copies}) == 3

        assert info == json.loads((state_dir / "aio.json").read_text())
        assert oct((state_dir / "aio.json").stat().st_mode & 0o777) == "0o600"
        for key in ("auth_url", "s3_url", "redis_url", "amqp_url", "state_dir", "tenants",
                    "controller_url", "admin_token"):
            assert info[key], key
        assert set(info["tenants"]) == {"t1", "t2", "t3"}
        keys = {t["key"] for t in info["tenants"].values()}
        assert len(keys) == 3 and all(len(k) >= 24 for k in keys)

        # Private services with generated credentials, no well-known ones.
        assert "guest" not in info["amqp_url"]
        assert redis.Redis.from_url(info["redis_url"]).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=int(info["redis_url"].rsplit(":", 1)[1].split("/")[0])).ping()
        pika.BlockingConnection(pika.URLParameters(info["amqp_url"])).close()

        pids = live_pids(state_dir)
        assert set(pids) == EXPECTED

        # The block bridge answers with its generated credentials and exports the demo volume.
        block = info["block_bridge"]
        call = {"jsonrpc": "2.0", "id": 1, "method": "list_filtered_volumes"}
        answer = requests.post(block["url"], json=call, auth=(block["user"], block["password"]),
                               timeout=30).json()
        assert [v["name"] for v in answer["result"]] == ["demo"]
        assert answer["result"][0]["iscsi_url"].startswith(f"iscsi://{block['iscsi_portal']}/")
        assert requests.post(block["url"], json=call, auth=(block["user"], "wrong"),
                             timeout=30).status_code == 401
        # Its iSCSI targets take the CHAP pair and initiator name aio.json records, only.
        size = [str(BUILD_DIR / "iscsi-rw"), "-i", block["iscsi_initiator"], "size",
                answer["result"][0]["iscsi_url"]]
        chap = {"LIBISCSI_CHAP_USERNAME": block["chap_user"],
                "LIBISCSI_CHAP_PASSWORD": block["chap_password"]}
        assert subprocess.run(size, env={**os.environ, **chap}, capture_output=True,
                              timeout=30).stdout.split()[0] == str(64 << 20).encode()
        assert subprocess.run(size, capture_output=True, timeout=30).returncode != 0

        status = aio_command("status", state_dir)
        assert status.returncode == 0, status.stdout

        # Idempotent: a second start keeps every process and every credential.
        again = aio_command("start", state_dir, "--json")
        assert again.returncode == 0, again.stderr
        assert live_pids(state_dir) == pids
        assert json.loads(again.stdout)["tenants"] == info["tenants"]
    finally:
        stopped = aio_command("stop", state_dir)
    assert stopped.returncode == 0
    assert not any(pid_alive(pid) for pid in pids.values())
    assert live_pids(state_dir) == {}
    assert not (state_dir / "aio.json").exists()
    assert str(state_dir) not in Path("/proc/mounts").read_text()  # no FUSE volume left
    down = aio_command("status", state_dir)
    assert down.returncode != 0


def test_port_in_use_fails_clearly_and_leaves_nothing_running(tmp_path):
    state_dir = tmp_path / "aio"
    args = ports_args()
    proxy_port = int(args[args.index("--proxy-port") + 1])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", proxy_port))
        squatter.listen()
        result = aio_command("start", state_dir, *args, "--start-timeout", "30")
    assert result.returncode == 1
    assert f"proxy: port 127.0.0.1:{proxy_port} is already in use" in result.stderr
    assert live_pids(state_dir) == {}
    assert not os.path.exists(state_dir / "aio.json")
