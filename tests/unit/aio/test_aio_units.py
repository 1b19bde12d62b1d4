"""Unit tests of the all-in-one's building blocks (no services needed)."""

from __future__ import annotations

import os
import stat
import sys
import time
from configparser import ConfigParser

import pytest

from iostack.aio import secrets
from iostack.aio.config import AioConfig
from iostack.aio.processes import ProcessManager
from iostack.aio.swift import PROXY_PIPELINE, SwiftLayout
from iostack.ports import free_port
from iostack.service_probes import redact


def test_config_precedence(tmp_path, monkeypatch):
    AioConfig.load(tmp_path, {"proxy_port": 9001, "replicas": 3}).save()
    assert AioConfig.load(tmp_path).proxy_port == 9001
    monkeypatch.setenv("IOSTACK_PROXY_PORT", "9002")
    assert AioConfig.load(tmp_path).proxy_port == 9002
    assert AioConfig.load(tmp_path, {"proxy_port": "9003"}).proxy_port == 9003
    assert AioConfig.load(tmp_path).replicas == 3


def test_config_rejects_bad_replicas(tmp_path):
    with pytest.raises(ValueError, match="replicas"):
        AioConfig.load(tmp_path, {"replicas": 4})


def test_secrets_are_generated_once_private_and_distinct(tmp_path):
    first = secrets.load_or_create(tmp_path)
    assert secrets.load_or_create(tmp_path) == first
    path = tmp_path / secrets.SECRETS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(set(first.values())) == len(first)
    extra = secrets.generated_secret(tmp_path, "redis_password")
    assert secrets.generated_secret(tmp_path, "redis_password") == extra


def test_swift_layout_writes_private_configs_and_rings(tmp_path):
    config = AioConfig.load(tmp_path, {"replicas": 3, "proxy_port": 18080})
    layout = SwiftLayout(config, secrets.load_or_create(tmp_path), "127.0.0.1:11211",
                         "redis://127.0.0.1:6379/0", "amqp://u:p@127.0.0.1:5672/%2F")
    layout.prepare()
    proxy = ConfigParser(interpolation=None)
    proxy.read(layout.conf_path("proxy"))
    assert proxy["DEFAULT"]["bind_port"] == "18080"
    assert proxy["pipeline:main"]["pipeline"].split() == PROXY_PIPELINE
    assert proxy["pipeline:main"]["pipeline"].index("s3api") < proxy["pipeline:main"][
        "pipeline"].index("tempauth")
    for name in PROXY_PIPELINE[:-1]:
        assert proxy.has_section(f"filter:{name}"), name
    assert proxy["filter:iostack_metrics"]["amqp_url"] == "amqp://u:p@127.0.0.1:5672/%2F"
    assert proxy["filter:iostack_metrics"]["namespace"] == config.namespace
    assert stat.S_IMODE(layout.conf_path("proxy").stat().st_mode) == 0o600
    assert sorted(p.name for p in layout.devices_dir.iterdir()) == ["d1", "d2", "d3"]

    from swift.common.ring import RingData

    ring = RingData.load(str(layout.swift_dir / "object.ring.gz"))
    assert ring.replica_count == 3
    assert {dev["port"] for dev in ring.devs} == {config.object_port}
    before = (layout.swift_dir / "object.ring.gz").stat().st_mtime_ns
    layout.prepare()  # unchanged inputs: rings are kept
    assert (layout.swift_dir / "object.ring.gz").stat().st_mtime_ns == before


def test_process_manager_start_find_stop(tmp_path):
    manager = ProcessManager(tmp_path)
    proc = manager.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert manager.find("sleeper") == proc
    assert manager.start("sleeper", ["false"]) == proc  # already running: not started twice
    assert manager.stop("sleeper")
    assert manager.find("sleeper") is None
    assert not manager.stop("sleeper")


def test_process_manager_stops_several_at_once_and_kills_what_ignores_sigterm(tmp_path):
    manager = ProcessManager(tmp_path)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    manager.start("polite", [sys.executable, "-c", "import time; time.sleep(60)"])
    manager.start("stubborn", [sys.executable, "-c", stubborn])
    time.sleep(0.5)  # the stubborn one has set its handler
    t0 = time.monotonic()
    assert manager.stop_all(["polite", "stubborn", "absent"], timeout=2) == ["polite", "stubborn"]
    assert time.monotonic() - t0 < 5  # one timeout for all, not one each
    assert manager.find("polite") is None and manager.find("stubborn") is None


def test_stale_pid_file_of_a_reused_pid_is_not_ours(tmp_path):
    manager = ProcessManager(tmp_path)
    manager.run_dir.mkdir(parents=True)
    # Our own pid, but with another start time: a pid reused by another program.
    manager.pid_file("ghost").write_text(f"{os.getpid()} 1\n")
    assert manager.find("ghost") is None
    assert not manager.stop("ghost")
    assert not manager.pid_file("ghost").exists()


def test_redact_hides_only_the_password():
    assert redact("amqp://guest:guest@127.0.0.1:5672/%2F") == "amqp://guest:***@127.0.0.1:5672/%2F"
    assert redact("redis://:s3cret@127.0.0.1:1234/0") == "redis://:***@127.0.0.1:1234/0"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_free_port_never_hands_out_a_port_reserved_for_another_component():
    reserved = free_port()
    assert free_port(preferred=reserved) == reserved  # free, and asked for
    for _ in range(20):
        assert free_port(preferred=reserved, avoid=frozenset({reserved})) != reserved


def test_keystone_pipeline_replaces_tempauth_and_uses_the_service_user(tmp_path):
    config = AioConfig.load(tmp_path, {"auth": "keystone", "keystone_port": 15000,
                                       "token_cache_seconds": 7})
    assert 15000 in config.ports()
    generated = secrets.load_or_create(tmp_path)
    layout = SwiftLayout(config, generated, "127.0.0.1:11211",
                         "redis://127.0.0.1:6379/0", "amqp://u:p@127.0.0.1:5672/%2F")
    layout.prepare()
    proxy = ConfigParser(interpolation=None)
    proxy.read(layout.conf_path("proxy"))
    pipeline = proxy["pipeline:main"]["pipeline"].split()
    assert "tempauth" not in pipeline
    at = pipeline.index("authtoken")
    assert pipeline[at - 1:at + 5] == ["ratelimit", "authtoken", "s3api", "s3token",
                                       "keystoneauth", "iostack_metrics"]
    authtoken = proxy["filter:authtoken"]
    assert authtoken["auth_url"] == "http://127.0.0.1:15000/v3"
    assert authtoken["password"] == generated["keystone_service_password"]
    assert authtoken["token_cache_time"] == "7"
    assert proxy["filter:keystoneauth"]["reseller_admin_role"] == "ResellerAdmin"
    assert proxy["filter:s3token"]["auth_uri"] == "http://127.0.0.1:15000/v3"
    with pytest.raises(ValueError, match="auth must be"):
        AioConfig.load(tmp_path, {"auth": "ldap"})


def test_config_ports_are_the_servers_ports(tmp_path):
    config = AioConfig.load(tmp_path, {"proxy_port": 18080, "iscsi_port": 13260})
    assert {18080, 13260, config.object_port, config.controller_port} <= config.ports()
    assert all(isinstance(port, int) for port in config.ports())


def test_generated_tokens_never_look_like_options():
    from iostack.aio.secrets import _token

    assert not any(_token().startswith("-") for _ in range(2000))


def test_status_lists_endpoints_and_the_sandbox_limits_without_passwords(tmp_path):
    from iostack.aio.stack import describe_endpoints, sandbox_limits

    config = AioConfig.load(tmp_path, {"proxy_port": 18080})
    layout = SwiftLayout(config, secrets.load_or_create(tmp_path), "127.0.0.1:11211",
                         "redis://:pw@127.0.0.1:6379/0", "amqp://u:pw@127.0.0.1:5672/%2F")
    layout.prepare()
    sandbox = sandbox_limits(layout.swift_dir)
    assert sandbox.startswith("bubblewrap, per tenant: memory 1G, 128 processes, 30 CPU s")
    assert sandbox_limits(tmp_path / "nowhere") == "not configured"
    info = {"proxy_urls": ["http://127.0.0.1:18080"], "swift_url": "http://127.0.0.1:18080",
            "auth_url": "http://127.0.0.1:18080/auth/v1.0", "s3_url": "http://127.0.0.1:18080",
            "s3_region": "us-east-1", "controller_url": "http://127.0.0.1:9090",
            "redis_url": "redis://:pw@127.0.0.1:6379/0", "amqp_url": "amqp://u:pw@h:5672/v",
            "memcache_url": "127.0.0.1:11211", "log_dir": "/state/log",
            "block_bridge": {"url": "http://127.0.0.1:18700/targetrpc",
                             "iscsi_portal": "127.0.0.1:3260"}}
    rows = dict(describe_endpoints(info, True, sandbox))
    assert rows["console"] == "http://127.0.0.1:9090/ui"
    assert rows["controller API"].startswith("http://127.0.0.1:9090/v1")
    assert rows["S3"].startswith("http://127.0.0.1:18080 (region us-east-1")
    assert rows["iSCSI portal"] == "127.0.0.1:3260 (tgtd, CHAP) up"
    assert rows["sandbox"] == sandbox
    assert "pw" not in rows["redis"] + rows["rabbitmq"]
    assert "iSCSI portal" not in dict(describe_endpoints(info | {"block_bridge": None}, False,
                                                         sandbox))


def test_status_names_the_docker_runtime_its_engine_and_image(tmp_path):
    from iostack.aio.stack import sandbox_limits

    config = AioConfig.load(tmp_path, {"sandbox": "docker"})
    layout = SwiftLayout(config, secrets.load_or_create(tmp_path), "127.0.0.1:11211",
                         "redis://:pw@127.0.0.1:6379/0", "amqp://u:pw@127.0.0.1:5672/%2F")
    layout.storlet_engine = {"docker_url": "unix:///s/podman.sock",
                             "default_container_image_name": "localhost/iostack-storlet:ab"}
    layout.prepare()
    sandbox = sandbox_limits(layout.swift_dir)
    assert sandbox.startswith("docker (Storlets' docker gateway; engine unix:///s/podman.sock, "
                              "image localhost/iostack-storlet:ab), per tenant: memory 1G, "
                              "128 processes")
    assert "container cgroups" in sandbox and "no network" in sandbox
    with pytest.raises(ValueError, match="sandbox must be bubblewrap or docker"):
        AioConfig.load(tmp_path, {"sandbox": "lxc"})
