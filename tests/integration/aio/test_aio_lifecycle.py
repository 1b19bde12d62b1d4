"""`iostack aio` with no service URLs configured starts its own Redis, RabbitMQ and memcached.

Runs a second, private all-in-one in a temporary state dir, on free ports, with
no service URLs: whatever answers on the machine's well-known ports (a
passwordless Redis on 6379, RabbitMQ's guest on 5672) must not be used.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pika
import pika.exceptions
import pytest
import redis
import requests
import swiftclient

import iostack
from iostack.aio.processes import ProcessManager
from iostack.aio.session import aio_command, free_port_args, start_on_free_ports
from iostack.block_bridge.native_lib import BUILD_DIR

pytestmark = pytest.mark.integration

EXPECTED = {"account", "container", "object", "proxy", "container-updater", "object-expirer",
            "controller", "block-bridge", "memcached", "redis", "rabbitmq", "epmd"}


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
    started = start_on_free_ports(state_dir, "--replicas", "3", "--block-demo", "1")
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
        # Private parts in 0700 directories; the state dir itself stays traversable,
        # because the sandbox user reaches the storlet directories through it.
        modes = {name: oct((state_dir / name).stat().st_mode & 0o777)
                 for name in ("etc", "etc/swift", "log", "run", "redis", "rabbitmq")}
        assert modes == dict.fromkeys(modes, "0o700")
        assert state_dir.stat().st_mode & 0o001
        for key in ("auth_url", "s3_url", "redis_url", "amqp_url", "state_dir", "tenants",
                    "controller_url", "admin_token"):
            assert info[key], key
        assert set(info["tenants"]) == {"t1", "t2", "t3"}
        keys = {t["key"] for t in info["tenants"].values()}
        assert len(keys) == 3 and all(len(k) >= 24 for k in keys)

        # Private services with generated credentials, no well-known ones.
        redis_url, amqp_url = urlsplit(info["redis_url"]), urlsplit(info["amqp_url"])
        assert redis_url.port != 6379 and len(redis_url.password) >= 24
        assert amqp_url.port != 5672 and amqp_url.username == "iostack"
        assert len(amqp_url.password) >= 24
        assert redis.Redis.from_url(info["redis_url"]).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=redis_url.port).ping()
        pika.BlockingConnection(pika.URLParameters(info["amqp_url"])).close()
        guest = amqp_url._replace(netloc=f"guest:guest@127.0.0.1:{amqp_url.port}").geturl()
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(pika.URLParameters(guest)).close()
        assert info["warnings"] == []

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
        # Beside pids and logs: where to reach it, and the sandbox limits in force.
        shown = dict(line.split(None, 1) for line in status.stdout.splitlines()
                     if line.startswith(("console ", "sandbox ")))
        assert shown["console"].strip() == info["controller_url"] + "/ui"
        assert shown["sandbox"].startswith("bubblewrap, per tenant: memory")
        assert f"{block['iscsi_portal']} (tgtd, CHAP) up" in status.stdout
        assert info["redis_url"] not in status.stdout  # its password is not printed
        assert info["version"] == iostack.__version__
        assert f"\niostack {iostack.__version__}\n" in status.stdout  # started by this release

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


def test_port_in_use_fails_clearly_and_leaves_nothing_running(tmp_path, shared_services):
    state_dir = tmp_path / "aio"
    args = shared_services.stack_args(f"in-use-{uuid.uuid4().hex[:8]}") + free_port_args()
    proxy_port = int(args[args.index("--proxy-port") + 1])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", proxy_port))
        squatter.listen()
        result = aio_command("start", state_dir, *args, "--start-timeout", "30")
    assert result.returncode == 1
    assert f"proxy: port 127.0.0.1:{proxy_port} is already in use" in result.stderr
    assert live_pids(state_dir) == {}
    assert not os.path.exists(state_dir / "aio.json")
    # Nor anything mounted: the devices (XFS images where the host allows) are unmounted.
    assert not any(os.path.ismount(d) for d in (state_dir / "srv" / "node").iterdir())
