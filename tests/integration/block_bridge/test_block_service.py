"""The JSON-RPC service as a process: auth, good and bad input, volumes
exported over real tgt/FUSE, restart, initiator methods."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from bb_helpers import iscsi_rw, make_backing, processes_showing, xts_encrypt

from iostack.block_bridge.processes import wait_for
from iostack.block_bridge.service import write_config
from iostack.ports import free_port, port_open

pytestmark = pytest.mark.integration


class Service:
    def __init__(self, tmp_path, **extra):
        self.state_dir = tmp_path / "state"
        self.devices = tmp_path / "devices"
        self.devices.mkdir()
        self.port = free_port()
        extra.setdefault("allowed_devices", [str(self.devices)])
        self.config = write_config(tmp_path / "block.json", self.state_dir, port=self.port,
                                   portal_port=free_port(), **extra)
        self.config_path = tmp_path / "block.json"
        self.log = tmp_path / "service.log"
        self.proc = None

    @property
    def access(self):
        return self.config.access()

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "iostack.block_bridge.service",
                 "--config", str(self.config_path)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: port_open("127.0.0.1", self.port), 20, "block service",
                 lambda: self.proc.poll() is None)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def post(self, body, auth=True, path="/targetrpc"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data)
        if auth:
            token = f"{self.config.user}:{self.config.password}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def call(self, method, **params):
        status, reply = self.post({"jsonrpc": "2.0", "id": 7, "method": method,
                                   "params": params})
        assert status == 200 and reply["id"] == 7
        return reply


@pytest.fixture
def service(tmp_path, native_build):
    svc = Service(tmp_path)
    svc.start()
    yield svc
    svc.stop()
    mounts = open("/proc/mounts").read()
    assert str(svc.state_dir) not in mounts, "FUSE mounts left behind"


def mounts_under(path) -> list[str]:
    return [line.split()[1] for line in open("/proc/mounts") if str(path) in line]


def test_auth_and_http_errors(service):
    body = {"jsonrpc": "2.0", "id": 1, "method": "list_filtered_volumes"}
    assert service.post(body, auth=False)[0] == 401
    good = service.config.password
    service.config.password = "wrong"
    assert service.post(body)[0] == 401
    service.config.password = good
    assert service.post(body, path="/other")[0] == 404
    assert service.post(body) == (200, {"jsonrpc": "2.0", "id": 1, "result": []})


def test_by_default_only_the_state_dirs_image_folder_is_exportable(tmp_path, native_build):
    """Security regression: the default allowed every path under /dev/, so an RPC
    caller could export the host's own disks (here: a file under /dev/shm), and
    every file of <state>/block, volumes.json (the AES-XTS keys) included."""
    config = write_config(tmp_path / "probe.json", tmp_path / "probe")
    assert config.allowed_devices == []
    svc = Service(tmp_path, allowed_devices=config.allowed_devices)
    host_file = make_backing(Path(f"/dev/shm/iostack-test-{os.getpid()}.img"), 1 << 20)
    svc.start()
    try:
        refused = svc.call("create_filtered_volume", name="hostdisk", device=str(host_file),
                           filters=[])
        assert refused["error"]["code"] == -32602
        assert "outside the allowed locations" in refused["error"]["message"]
        own = make_backing(svc.state_dir / "block-images" / "own.img", 1 << 20)
        created = svc.call("create_filtered_volume", name="own", device=str(own), filters=[])
        assert created["result"]["backing"] == str(own)
        for state_file in ("volumes.json", "groups.json", "tgtd.log"):
            path = svc.state_dir / "block" / state_file
            path.touch()
            refused = svc.call("create_filtered_volume", name="keys", device=str(path),
                               filters=[])
            assert "the bridge's own state" in refused["error"]["message"], refused
        fuse_file = created["result"]["device"]  # another volume's FUSE frontend
        refused = svc.call("create_filtered_volume", name="nested", device=fuse_file,
                           filters=[])
        assert "the bridge's own state" in refused["error"]["message"], refused
        assert [v["name"] for v in svc.call("list_filtered_volumes")["result"]] == ["own"]
    finally:
        svc.stop()
        host_file.unlink()


def test_batch_and_notification(service):
    status, replies = service.post([
        {"jsonrpc": "2.0", "id": 1, "method": "list_filtered_volumes"},
        {"jsonrpc": "2.0", "method": "list_filtered_volumes"},
        {"jsonrpc": "2.0", "id": 2, "method": "nosuch"},
    ])
    assert status == 200
    assert [(r["id"], "result" in r) for r in replies] == [(1, True), (2, False)]


@pytest.mark.parametrize(
    ("body", "code", "text"),
    [
        (b"{not json", -32700, "parse error"),
        ({"id": 1, "method": "list_filtered_volumes"}, -32600, "jsonrpc '2.0'"),
        ({"jsonrpc": "2.0", "id": 1, "method": "format_disk"}, -32601, "not found"),
        ({"jsonrpc": "2.0", "id": 1, "method": "create_filtered_volume", "params": [1]},
         -32602, "params must be an object"),
    ],
)
def test_protocol_errors(service, body, code, text):
    status, reply = service.post(body)
    assert status == 200 and reply["error"]["code"] == code
    assert text in reply["error"]["message"]


@pytest.mark.parametrize(
    ("params", "code", "text"),
    [
        ({"filters": ["nosuch"]}, -32602, "unknown filter 'nosuch'"),
        ({"filters": ["xor(key=0x1ff)"]}, -32602, "must be a number in [0, 255]"),
        ({"filters": "xor>(bitrev"}, -32602, "expected a filter name"),
        ({"filters": [3]}, -32602, "filters must be a list"),
        ({"filters": ["xor"], "name": "../x"}, -32602, "name must match"),
        ({"filters": ["xor"], "device": "/etc/passwd"}, -32602, "outside the allowed"),
        ({"filters": ["xor"], "device": None}, -32602, "exactly one of"),
        ({"filters": ["xor"], "serial": "abc"}, -32602, "exactly one of"),
        ({"filters": ["xor"], "colour": "red"}, -32602, "unknown parameters ['colour']"),
    ],
)
def test_bad_requests_create_nothing(service, params, code, text):
    backing = make_backing(service.devices / "disk.img", 1 << 20)
    request = {"name": "vol1", "device": str(backing), **params}
    request = {k: v for k, v in request.items() if v is not None}
    reply = service.call("create_filtered_volume", **request)
    assert reply["error"]["code"] == code and text in reply["error"]["message"]
    assert service.call("list_filtered_volumes")["result"] == []
    assert mounts_under(service.state_dir) == []
    portal = {"hostname": "127.0.0.1", "port": service.config.portal_port}
    assert service.call("discover_portal", **portal)["result"] == {}


def test_volume_lifecycle_over_iscsi_and_restart(service):
    backing = make_backing(service.devices / "disk.img", 8 << 20)
    reply = service.call("create-filtered-volume", name="fvol1", device=str(backing),
                         filters=["xor(key=0x0f)", "bitrev"])
    result = reply["result"]
    assert result["spec"] == "xor(key=0x0f)>bitrev"
    url = result["iscsi_url"]
    assert url == (f"iscsi://127.0.0.1:{service.config.portal_port}/"
                   f"iqn.2026-11.org.iostack:fvol1/1")
    data = os.urandom(128 * 1024)
    iscsi_rw(service.access, "write", url, "4096", data=data)
    assert iscsi_rw(service.access, "read", url, "4096", str(len(data))) == data
    stored = backing.read_bytes()[4096:4096 + len(data)]
    assert stored == bytes(int(f"{b ^ 0x0F:08b}"[::-1], 2) for b in data)

    # SendTargets shows the target to listed initiators only: discover_portal
    # speaks as libiscsi's default initiator here (no open-iscsi), not listed.
    portal = {"hostname": "127.0.0.1", "port": service.config.portal_port}
    assert service.call("discover_portal", **portal)["result"] == {}
    listed = subprocess.run(["iscsi-ls", "-i", service.access.initiators[0], "-s",
                             f"iscsi://127.0.0.1:{service.config.portal_port}"],
                            capture_output=True, text=True, timeout=30)
    assert (f"Target:iqn.2026-11.org.iostack:fvol1 Portal:127.0.0.1:"
            f"{service.config.portal_port},1") in listed.stdout

    again = service.call("create_filtered_volume", name="fvol1", device=str(backing),
                         filters=[])
    assert again["error"]["code"] == -50
    other = service.call("create_filtered_volume", name="fvol2", device=str(backing),
                         filters=[])
    assert other["error"]["code"] == -50 and "already used" in other["error"]["message"]

    # Restart: the volume comes back and still reads the same data.
    service.stop()
    assert mounts_under(service.state_dir) == []
    service.start()
    assert [v["name"] for v in service.call("list_filtered_volumes")["result"]] == ["fvol1"]
    assert iscsi_rw(service.access, "read", url, "4096", str(len(data))) == data

    assert service.call("delete_filtered_volume", name="fvol1")["result"] is None
    assert service.call("list_filtered_volumes")["result"] == []
    assert mounts_under(service.state_dir) == []
    assert service.call("delete_filtered_volume", name="fvol1")["error"]["code"] == -103


def test_targets_need_the_chap_pair_and_a_listed_initiator(service):
    """Security regression: every target was bound to all initiator addresses
    without CHAP, so any local process could read and write every volume."""
    access = service.access
    assert len(access.chap_password) >= 24 and access.initiators
    backing = make_backing(service.devices / "acl.img", 1 << 20)
    url = service.call("create_filtered_volume", name="acl", device=str(backing),
                       filters=["xor(key=0x5a)"])["result"]["iscsi_url"]
    assert iscsi_rw(access, "size", url).split()[0] == str(1 << 20).encode()

    wrong = replace(access, chap_password="not-the-password")
    for attempt, initiator, chap in ((access, None, False), (wrong, None, True),
                                     (access, "iqn.2026-11.org.example:intruder", True)):
        failed = iscsi_rw(attempt, "size", url, initiator=initiator, chap=chap, check=False)
        assert b"Failed to log in" in failed, failed
    assert backing.read_bytes() == bytes(1 << 20)


def test_an_aes_xts_key_stays_out_of_argv_listings_and_errors(service):
    """Security regression: the key was on the FUSE frontend's command line
    (/proc/<pid>/cmdline, readable by every local user) and in the spec and
    filters that create_filtered_volume and list_filtered_volumes return."""
    key = os.urandom(32)
    backing = make_backing(service.devices / "secret.img", 4 << 20)
    bad = service.call("create_filtered_volume", name="enc", device=str(backing),
                       filters=[f"aes_xts(key={key.hex()[:-2]})"])
    assert bad["error"]["code"] == -32602 and "hex digits" in bad["error"]["message"]
    assert key.hex()[:-2] not in json.dumps(bad)
    created = service.call("create_filtered_volume", name="enc", device=str(backing),
                           filters=[f"aes_xts(key={key.hex()})", "xor(key=0x11)"])["result"]
    listed = service.call("list_filtered_volumes")["result"]
    assert listed == [created]
    assert created["spec"] == "aes_xts(key=***)>xor(key=0x11)"
    assert created["filters"] == ["aes_xts(key=***)", "xor(key=0x11)"]
    assert key.hex() not in json.dumps(listed)
    assert processes_showing(key.hex()) == []
    data = os.urandom(64 * 1024)
    iscsi_rw(service.access, "write", created["iscsi_url"], "8192", data=data)
    assert iscsi_rw(service.access, "read", created["iscsi_url"], "8192", str(len(data))) == data
    stored = backing.read_bytes()[8192:8192 + len(data)]
    assert stored == bytes(b ^ 0x11 for b in xts_encrypt(key, data, 8192))
    volumes_json = service.state_dir / "block" / "volumes.json"
    assert stat.S_IMODE(volumes_json.stat().st_mode) == 0o600


def test_initiator_methods_without_a_kernel_initiator(service):
    if shutil.which("iscsiadm"):
        pytest.skip("iscsiadm is installed here: login would touch the host's initiator")
    backing = make_backing(service.devices / "init.img", 1 << 20)
    iqn = service.call("create_filtered_volume", name="init", device=str(backing),
                       filters=[])["result"]["target_iqn"]
    reply = service.call("login_target", targetname=iqn, hostname="127.0.0.1",
                         port=service.config.portal_port)
    assert reply["error"]["code"] == -32000 and "iscsiadm" in reply["error"]["message"]
    bad = service.call("discover_portal", hostname="127.0.0.1; rm -rf /")
    assert bad["error"]["code"] == -32602


def test_initiator_methods_reach_only_this_bridges_portal_and_targets(service, tgtd):
    """Security regression: discover_portal queried any host and port, login and
    logout took any target (here: another tgtd's portal on this host)."""
    other = {"hostname": "127.0.0.1", "port": tgtd.port}
    refused = service.call("discover_portal", **other)
    assert refused["error"]["code"] == -32602
    assert "not this bridge's" in refused["error"]["message"]
    foreign = service.call("login_target", targetname="iqn.2026-11.org.example:other",
                           hostname="127.0.0.1", port=service.config.portal_port)
    assert foreign["error"]["code"] == -32602
    assert "not one of this bridge's volumes" in foreign["error"]["message"]
    assert service.call("discover_portal")["result"] == {}  # its own portal by default


def test_demo_volume_is_created_at_start(tmp_path, native_build):
    svc = Service(tmp_path, demo_volume={"name": "demo", "size": 4 << 20,
                                         "filters": "xor(key=0x5a)>bitrev"})
    svc.start()
    try:
        (volume,) = svc.call("list_filtered_volumes")["result"]
        assert volume["name"] == "demo" and volume["spec"] == "xor(key=0x5a)>bitrev"
        assert iscsi_rw(svc.access, "size", volume["iscsi_url"]).split()[0] == str(4 << 20).encode()
        info = json.loads((svc.state_dir / "block" / "service.json").read_text())
        assert info["url"] == f"http://127.0.0.1:{svc.port}/targetrpc"
        assert info["pid"] == svc.proc.pid
    finally:
        svc.stop()
    assert mounts_under(svc.state_dir) == []
    assert not (svc.state_dir / "block" / "service.json").exists()


def test_cli_call_reaches_the_service(service, capsys):
    import argparse

    from iostack.block_bridge.cli import register

    parser = argparse.ArgumentParser(prog="iostack")
    register(parser.add_subparsers(dest="command", required=True))
    backing = make_backing(service.devices / "cli.img", 1 << 20)
    args = parser.parse_args(["block", "call", "--config", str(service.config_path),
                              "create_filtered_volume", "name=clivol", f"device={backing}",
                              'filters=["xor(key=3)"]'])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["spec"] == "xor(key=3)"
    args = parser.parse_args(["block", "call", "--config", str(service.config_path),
                              "delete_filtered_volume", "name=nosuch"])
    assert args.func(args) == 1
    assert "error -103" in capsys.readouterr().err


@pytest.fixture
def policy_service(tmp_path, native_build, aio):
    """A bridge that asks the all-in-one's controller for volumes' policies."""
    svc = Service(tmp_path, controller_url=aio["controller_url"],
                  controller_token=aio["admin_token"])
    svc.start()
    yield svc
    svc.stop()


def test_volume_stack_comes_from_volume_and_storage_group_policies(policy_service, policies):
    svc = policy_service
    suffix = os.urandom(4).hex()
    group, volume = f"gold{suffix}", f"db{suffix}"
    created = svc.call("create_storage_group", name=group, nodes=["node-a", "node-b"],
                       policy={"media_tier": "nvme", "fabric": "iscsi", "iops": 300})
    assert created["result"]["policy"]["iops"] == 300
    assert svc.call("create_storage_group", name=group, nodes=["x"])["error"]["code"] == -50
    assert group in [g["name"] for g in svc.call("list_storage_groups")["result"]]
    policies.add(f"FOR STORAGE_GROUP {group} DO SET XOR WITH key=0x11\n"
                 f"FOR VOLUME {volume} DO SET BITREV")

    backing = make_backing(svc.devices / "db.img", 8 << 20)
    reply = svc.call("create_filtered_volume", name=volume, device=str(backing),
                     storage_group=group)
    result = reply["result"]
    # The group's limit on top, then the group's and the volume's own filters.
    assert result["spec"] == "iops(read=300,write=300)>xor(key=17)>bitrev"
    data = os.urandom(64 * 1024)
    iscsi_rw(svc.access, "write", result["iscsi_url"], "4096", data=data)
    assert iscsi_rw(svc.access, "read", result["iscsi_url"], "4096", str(len(data))) == data
    assert backing.read_bytes()[4096:4096 + len(data)] != data  # stored transformed

    missing = svc.call("create_filtered_volume", name=f"x{suffix}", device=str(backing),
                       storage_group="no-such-group")
    assert missing["error"]["code"] == -103 and "no-such-group" in missing["error"]["message"]
    assert svc.call("delete_filtered_volume", name=volume)["result"] is None
    assert svc.call("delete_storage_group", name=group)["result"] is None


def test_an_aes_xts_volume_policy_through_the_controller_works_end_to_end(
        policy_service, policies, aio, swift_for):
    """Security/function regression: the bridge read policies through explain,
    which masks secret parameters, so 'FOR VOLUME v DO SET AES_XTS WITH key=...'
    reached it as key=*** and create_filtered_volume answered -32603. It now
    reads the admin-only, unmasked route, which a tenant cannot."""
    from iostack.controller.client import ControllerClient, ControllerError

    svc = policy_service
    volume = f"enc{os.urandom(4).hex()}"
    key = os.urandom(32)
    policies.add(f'FOR VOLUME {volume} DO SET AES_XTS WITH key="{key.hex()}"')

    backing = make_backing(svc.devices / "enc.img", 4 << 20)
    reply = svc.call("create_filtered_volume", name=volume, device=str(backing))
    assert "error" not in reply, reply
    assert reply["result"]["spec"] == "aes_xts(key=***,sector=512)"
    assert key.hex() not in json.dumps(svc.call("list_filtered_volumes"))
    assert processes_showing(key.hex()) == []
    data = os.urandom(64 * 1024)
    url = reply["result"]["iscsi_url"]
    iscsi_rw(svc.access, "write", url, "4096", data=data)
    assert iscsi_rw(svc.access, "read", url, "4096", str(len(data))) == data
    assert backing.read_bytes()[4096:4096 + len(data)] == xts_encrypt(key, data, 4096)

    _, tenant_token = swift_for("t1").get_auth()
    with pytest.raises(ControllerError) as denied:
        ControllerClient(aio["controller_url"], tenant_token).volume_stack(volume)
    assert denied.value.status in (401, 403)  # a tenant token names no admin, whichever way
    assert svc.call("delete_filtered_volume", name=volume)["result"] is None


def test_restore_refuses_edited_records(tmp_path, native_build):
    """Security regression: restore() re-exported volumes.json as written, so an
    edited record exported a host file or the bridge's own key file over iSCSI."""
    svc = Service(tmp_path)
    svc.start()
    try:
        backing = make_backing(svc.devices / "kept.img", 1 << 20)
        svc.call("create_filtered_volume", name="kept", device=str(backing), filters=[])
    finally:
        svc.stop()
    volumes_json = svc.state_dir / "block" / "volumes.json"
    (kept,) = json.loads(volumes_json.read_text())
    host_file = make_backing(tmp_path / "host-disk", 1 << 20)
    edited = [kept, {**kept, "name": "keys", "backing": str(volumes_json), "tid": 2,
                     "iqn": "iqn.2026-11.org.iostack:keys"},
              {**kept, "name": "host", "backing": str(host_file), "tid": 3,
               "iqn": "iqn.2026-11.org.iostack:host"}]
    volumes_json.write_text(json.dumps(edited))
    svc.start()
    try:
        assert [v["name"] for v in svc.call("list_filtered_volumes")["result"]] == ["kept"]
        listed = subprocess.run(["iscsi-ls", "-i", svc.access.initiators[0], "-s",
                                 f"iscsi://127.0.0.1:{svc.config.portal_port}"],
                                capture_output=True, text=True, timeout=30,
                                env={**os.environ, **svc.access.initiator_env()}).stdout
        assert "iostack:kept" in listed
        assert "iostack:keys" not in listed and "iostack:host" not in listed
    finally:
        svc.stop()
    log = svc.log.read_text()
    assert "'keys' not restored" in log and "own state" in log
    assert "'host' not restored" in log and "outside the allowed" in log


def test_rpc_clients_cannot_hold_the_service(tmp_path, native_build):
    """Security regression: the RPC server had no socket timeout and no cap, so a
    client that sent half a request held a thread forever, and many such
    clients held the service."""
    import socket
    import time

    svc = Service(tmp_path, rpc_timeout=5, rpc_connections=2)
    svc.start()
    try:
        # Served once first: the start-up probe's connection (and this call's) may
        # hold a slot for a moment after it ends, which a stalled client must not meet.
        assert svc.call("list_filtered_volumes")["result"] == []
        auth = base64.b64encode(f"{svc.config.user}:{svc.config.password}".encode())

        def stall(partial: bytes) -> socket.socket:
            for _ in range(20):
                sock = socket.create_connection(("127.0.0.1", svc.port), timeout=10)
                sock.sendall(partial)
                sock.settimeout(0.3)
                try:
                    answer = sock.recv(1024)  # only a busy server answers half a request
                except TimeoutError:
                    sock.settimeout(10)
                    return sock
                assert b" 503 " in answer, answer
                sock.close()
                time.sleep(0.2)
            raise AssertionError("a slot stayed busy for 20 tries")

        stalled = [stall(partial) for partial in (
            b"POST /targetrpc HTTP/1.1\r\nHost: x\r\n",  # headers never end
            b"POST /targetrpc HTTP/1.1\r\nAuthorization: Basic " + auth +  # body
            b"\r\nContent-Length: 100\r\n\r\n{")]
        status, text = svc.post({"jsonrpc": "2.0", "id": 1, "method": "list_filtered_volumes"})
        assert status == 503 and "too many connections" in text
        started = time.monotonic()
        for sock in stalled:
            assert sock.recv(1024) == b""  # dropped by the server
            sock.close()
        assert time.monotonic() - started < 9
        assert svc.call("list_filtered_volumes")["result"] == []
    finally:
        svc.stop()


def test_a_failing_filter_fails_the_iscsi_write_and_stores_nothing(tmp_path, failing_filters):
    """Regression: block filters could not fail a write (void transforms), so an
    initiator got success for writes that never happened correctly. Through the
    real FUSE + tgt frontend, a filter's failure is a failed SCSI command."""
    filters = failing_filters
    flag = tmp_path / "fail-now"
    svc = Service(tmp_path, filter_dir=str(filters))
    svc.start()
    try:
        backing = make_backing(svc.devices / "flaky.img", 1 << 20)
        url = svc.call("create_filtered_volume", name="flaky", device=str(backing),
                       filters=[f"failing(flag={flag})", "xor(key=0x0f)"])["result"]["iscsi_url"]
        flag.touch()
        failed = iscsi_rw(svc.access, "write", url, "4096", data=os.urandom(8192), check=False)
        assert b"iscsi-rw" in failed, failed
        flag.unlink()
        assert backing.read_bytes() == bytes(1 << 20)
        data = os.urandom(8192)
        iscsi_rw(svc.access, "write", url, "4096", data=data)
        assert iscsi_rw(svc.access, "read", url, "4096", str(len(data))) == data
    finally:
        svc.stop()
