"""Unit tests of the cluster mode's plan, configs and rings (no namespaces are created)."""

from __future__ import annotations

import ipaddress
import socket
from configparser import ConfigParser

import pytest
from swift.common.ring import RingData

from iostack.aio import secrets
from iostack.aio.cluster import (
    NODE_DAEMONS,
    Cluster,
    cluster_process_names,
    reachable_from_nodes,
)
from iostack.aio.config import AioConfig
from iostack.aio.netns import ClusterNetwork, NetworkPlan
from iostack.doctor.pipelines import find_configs
from iostack.ports import free_port

PLAN = NetworkPlan(tag="0123abcd", subnet="10.249.7.0/24", nodes=3)


def test_a_cluster_gets_two_proxies_and_three_replicas_unless_told(tmp_path):
    config = AioConfig.load(tmp_path, {"nodes": 3})
    assert (config.cluster, config.proxies, config.replicas) == (True, 2, 3)
    assert AioConfig.load(tmp_path, {"nodes": 3, "proxies": 1}).proxies == 1
    single = AioConfig.load(tmp_path)
    assert (single.cluster, single.proxies, single.replicas) == (False, 1, 1)
    with pytest.raises(ValueError, match="nodes"):
        AioConfig.load(tmp_path, {"nodes": 2})
    assert AioConfig.load(tmp_path, {"workers": 3}).proxy_worker_count == 3
    assert AioConfig.load(tmp_path, {"workers": 3, "proxy_workers": 2}).proxy_worker_count == 2


def test_names_and_addresses_are_unique_to_the_state_dir(tmp_path):
    one, two = ClusterNetwork(tmp_path / "a", 3), ClusterNetwork(tmp_path / "b", 3)
    assert one.tag != two.tag and one.tag == ClusterNetwork(tmp_path / "a", 3).tag
    plan = NetworkPlan(one.tag, "10.249.7.0/24", 3)
    assert len(plan.root_if) <= 15  # the kernel's limit for interface names
    assert plan.namespaces == [f"iostack-{one.tag}-hub"] + [
        f"iostack-{one.tag}-node{n}" for n in (1, 2, 3)]
    addresses = [plan.gateway] + [plan.node_address(n) for n in (1, 2, 3)]
    assert addresses == ["10.249.7.1", "10.249.7.11", "10.249.7.12", "10.249.7.13"]
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network(plan.subnet) for a in addresses)
    assert plan.enter(2) == ["nsenter", f"--net=/run/netns/iostack-{one.tag}-node2", "--"]


def test_nodes_reach_private_services_on_the_bridge_and_refuse_an_operators_loopback():
    url = "amqp://iostack:pw@127.0.0.1:5679/%2F"
    assert reachable_from_nodes("rabbitmq", url, True, "10.249.7.1") == \
        "amqp://iostack:pw@10.249.7.1:5679/%2F"
    assert reachable_from_nodes("memcached", "127.0.0.1:11999", True, "10.249.7.1") == \
        "10.249.7.1:11999"
    assert reachable_from_nodes("rabbitmq", "amqp://u:p@192.0.2.9:5672/v", False,
                                "10.249.7.1") == "amqp://u:p@192.0.2.9:5672/v"
    with pytest.raises(ValueError, match="cannot be reached from the storage nodes"):
        reachable_from_nodes("rabbitmq", url, False, "10.249.7.1")


@pytest.fixture
def cluster(tmp_path) -> Cluster:
    config = AioConfig.load(tmp_path, {"nodes": 3, "proxy_workers": 4})
    return Cluster(config, secrets.load_or_create(tmp_path), PLAN,
                   "127.0.0.1:11211", "redis://:pw@127.0.0.1:6400/0",
                   "amqp://u:pw@127.0.0.1:5700/%2F", "10.249.7.1:11211",
                   "amqp://u:pw@10.249.7.1:5700/%2F")


def read(path) -> ConfigParser:
    conf = ConfigParser(interpolation=None)
    conf.read(path)
    return conf


def test_each_host_gets_its_own_configs_and_the_same_rings(cluster, tmp_path):
    cluster.prepare()
    swift = tmp_path / "swift"
    proxy = read(swift / "proxy" / "etc" / "proxy-server.conf")
    assert proxy["DEFAULT"]["workers"] == "4" and proxy["DEFAULT"]["bind_ip"] == "127.0.0.1"
    assert proxy["filter:iostack"]["redis_url"] == "redis://:pw@127.0.0.1:6400/0"
    # Named as swift-init and `iostack doctor` find a kind's configs (proxy-server*).
    assert find_configs(str(swift / "proxy" / "etc"), "proxy") == [
        str(swift / "proxy" / "etc" / name) for name in ("proxy-server-2.conf",
                                                           "proxy-server.conf")]
    for n in (1, 2, 3):
        etc = swift / f"node{n}" / "etc"
        obj = read(etc / "object-server.conf")
        assert obj["DEFAULT"]["bind_ip"] == f"10.249.7.1{n}"
        assert obj["DEFAULT"]["devices"] == str(swift / f"node{n}" / "srv")
        assert obj["DEFAULT"]["workers"] == "1"
        assert obj["filter:iostack_metrics"]["amqp_url"] == "amqp://u:pw@10.249.7.1:5700/%2F"
        assert obj["object-replicator"]["sync_method"] == "ssync"
        gateway = read(etc / "storlet-gateway.conf")
        assert gateway["DEFAULT"]["host_root"] == str(swift / f"node{n}" / "storlets")
        assert "10.249.7.1:11211" in (etc / "storlet-internal-client.conf").read_text()
        assert f"address = 10.249.7.1{n}" in (etc / "rsyncd.conf").read_text()
        assert (swift / f"node{n}" / "srv" / "d1").is_dir()
        for daemon, server in NODE_DAEMONS.items():
            assert read(etc / f"{server}-server.conf").has_section(daemon)
        for kind in ("account", "container", "object"):
            assert (etc / f"{kind}.ring.gz").read_bytes() == \
                (swift / "proxy" / "etc" / f"{kind}.ring.gz").read_bytes()
    ring = RingData.load(str(swift / "proxy" / "etc" / "object.ring.gz"))
    assert ring.replica_count == 3
    assert sorted((d["zone"], d["ip"], d["port"]) for d in ring.devs) == [
        (1, "10.249.7.11", 6200), (2, "10.249.7.12", 6200), (3, "10.249.7.13", 6200)]
    # Every partition has a replica on every node: one node down leaves two.
    assert all(sorted(ring._replica2part2dev_id[r][p] for r in range(3)) == [0, 1, 2]
               for p in range(len(ring._replica2part2dev_id[0])))


def test_processes_run_in_their_nodes_namespace(cluster):
    procs = cluster.processes()
    assert [p.name for p in procs] == cluster_process_names(cluster.config)
    by_name = {p.name: p for p in procs}
    assert by_name["node2-object"].argv[:3] == PLAN.enter(2)
    assert by_name["node2-object"].address == ("10.249.7.12", 6200)
    assert by_name["node3-rsyncd"].address == ("10.249.7.13", 873)
    assert by_name["node1-object-replicator"].address is None
    assert by_name["proxy2"].argv[0] != "nsenter"
    assert by_name["proxy2"].address == ("127.0.0.1", cluster.config.proxy2_port)


def test_a_port_in_time_wait_is_handed_out_again():
    """A restarted Redis or RabbitMQ gets its port back: its clients reconnect."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its port is in TIME_WAIT
    client.close()
    server.close()
    assert free_port(port) == port
