"""A multi-node Swift on one machine: ``iostack aio start --nodes 3``.

Each storage node runs in a network namespace of its own (``iostack.aio.netns``)
with its own address: its account, container and object servers, the
replicators, auditors and updaters, and an rsync daemon (the account and
container replicators copy whole databases with it; objects replicate
over ssync). The proxies, the controller, Redis, RabbitMQ and memcached run
in the root namespace; proxies reach the nodes through the stack's veth into
the cluster bridge, nodes reach RabbitMQ (metrics) and memcached (the
Storlets internal client) on the root namespace's address on that bridge.

The rings are built with Swift's ring builder: one device per node, node
``i`` in zone ``i`` (zones 1-3 repeat beyond three nodes), three replicas.
Each host has its own Swift directory, as separate machines would::

    <state>/swift/rings/               the ring builder's files (*.builder)
    <state>/swift/proxy/etc/           swift.conf, proxy-server.conf, proxy-server-2.conf,
                                       rings, storlet-gateway.conf, storlet-internal-client.conf
    <state>/swift/node<i>/etc/         swift.conf, account-, container-, object-server.conf
                                       (daemon sections included), rsyncd.conf, rings,
                                       storlet-gateway.conf, storlet-internal-client.conf
    <state>/swift/node<i>/srv/d1/      the node's device (accounts/, containers/, objects/)
    <state>/swift/node<i>/cache/       recon cache
    <state>/swift/node<i>/storlets/    the node's Storlets sandboxes (host_root)

Process names (pid files ``run/<name>.pid``, logs ``log/<name>.log``) are
``node<i>-<server or daemon>`` and ``proxy``, ``proxy2``.
"""

from __future__ import annotations

import getpass
import grp
import os
import subprocess
from configparser import ConfigParser
from pathlib import Path
from urllib.parse import urlsplit

from iostack.aio.config import AioConfig
from iostack.aio.netns import NetworkPlan
from iostack.aio.swift import (
    RING_KINDS,
    RingDevice,
    SwiftHost,
    SwiftLayout,
    SwiftProcess,
    build_rings,
)
from iostack.private_files import write_private_text

# Daemons of every storage node: name -> the server whose config they read.
NODE_DAEMONS = {
    "object-replicator": "object", "object-auditor": "object", "object-updater": "object",
    "container-replicator": "container", "container-auditor": "container",
    "container-updater": "container",
    "account-replicator": "account", "account-auditor": "account",
}
NODE_SERVERS = ("account", "container", "object")
REPLICATORS = ("object-replicator", "container-replicator", "account-replicator")
# 64 partitions: a test cluster's three devices; replication passes stay short.
CLUSTER_PART_POWER = 6
RSYNCD = "rsyncd"
# Seconds between replication passes. Swift's default (30) too; an explicit pass
# (``Cluster.replicate_once``) heals a node at once.
REPLICATION_INTERVAL = 30
# Daemon settings that keep an idle cluster of 3 nodes cheap on a small machine.
DAEMON_SETTINGS = {
    "object-replicator": {"sync_method": "ssync", "interval": str(REPLICATION_INTERVAL),
                          "concurrency": "1"},
    "object-auditor": {"interval": "300", "files_per_second": "10", "bytes_per_second": "1000000"},
    "object-updater": {"interval": "10", "concurrency": "1"},
    "container-replicator": {"interval": str(REPLICATION_INTERVAL), "concurrency": "1"},
    "container-auditor": {"interval": "300"},
    "account-replicator": {"interval": str(REPLICATION_INTERVAL), "concurrency": "1"},
    "account-auditor": {"interval": "300"},
}


def node_name(node: int) -> str:
    return f"node{node}"


def node_zone(node: int) -> int:
    return (node - 1) % 3 + 1


def reachable_from_nodes(name: str, url: str, private: bool, gateway: str) -> str:
    """``url`` as the storage nodes reach it: a private server's on the root's bridge address.

    An operator's server on loopback cannot be reached from a node's namespace.
    """
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    if parts.hostname not in ("127.0.0.1", "localhost"):
        return url
    if not private:
        raise ValueError(
            f"{name} at loopback ({parts.hostname}) cannot be reached from the storage nodes' "
            f"namespaces: leave its URL unset (the cluster starts its own) or give an address "
            f"the nodes reach")
    netloc = parts.netloc.replace(parts.hostname, gateway, 1)
    moved = parts._replace(netloc=netloc).geturl()
    return moved if "://" in url else moved.split("://", 1)[1]


class NodeLayout(SwiftLayout):
    """The Swift host of one storage node: its servers, daemons and device."""

    def __init__(self, config: AioConfig, secrets: dict[str, str], memcache_url: str,
                 amqp_url: str, host: SwiftHost) -> None:
        # Nodes never read Redis (policies are resolved by the proxies).
        super().__init__(config, secrets, memcache_url, "", amqp_url, host)

    @property
    def device_names(self) -> list[str]:
        return ["d1"]

    @property
    def proxies(self) -> list[str]:
        return []

    @property
    def daemons(self) -> dict[str, str]:
        return NODE_DAEMONS

    def _server_conf(self, server: str) -> ConfigParser:
        conf = super()._server_conf(server)
        for daemon, owner in NODE_DAEMONS.items():
            if owner == server:
                settings = DAEMON_SETTINGS.get(daemon, {})
                conf[daemon] = {**(dict(conf[daemon]) if conf.has_section(daemon) else {}),
                                **settings}
        return conf

    def _build_rings(self) -> None:
        """The cluster builds one set of rings for every host."""

    def rsyncd_conf(self, address: str) -> Path:
        path = self.swift_dir / "rsyncd.conf"
        modules = "".join(
            f"[{kind}]\npath = {self.devices_dir}\nread only = false\n"
            f"lock file = {self.host.cache_dir / f'rsync-{kind}.lock'}\n\n"
            for kind in RING_KINDS)
        write_private_text(path, (
            f"uid = {getpass.getuser()}\ngid = {grp.getgrgid(os.getgid()).gr_name}\n"
            f"use chroot = no\naddress = {address}\nport = 873\nmax connections = 4\n"
            f"log file = /dev/stderr\n\n{modules}"))
        return path


class ProxyHostLayout(SwiftLayout):
    """The host of the proxies (the root namespace): no devices, rings for the nodes."""

    @property
    def device_names(self) -> list[str]:
        return []

    @property
    def servers(self) -> list[str]:
        return self.proxies

    @property
    def daemons(self) -> dict[str, str]:
        return {}  # the nodes run the updaters

    def _build_rings(self) -> None:
        """The cluster builds one set of rings for every host."""


class Cluster:
    """Configs, rings and process commands of the storage nodes and the proxies."""

    def __init__(self, config: AioConfig, secrets: dict[str, str], plan: NetworkPlan,
                 memcache_url: str, redis_url: str, amqp_url: str,
                 node_memcache_url: str, node_amqp_url: str) -> None:
        self.config = config
        self.plan = plan
        self.root = config.state_dir / "swift"
        self.proxy = ProxyHostLayout(config, secrets, memcache_url, redis_url, amqp_url,
                                     self._host("proxy", config.host))
        self.nodes = {
            n: NodeLayout(config, secrets, node_memcache_url, node_amqp_url,
                          self._host(node_name(n), plan.node_address(n)))
            for n in range(1, config.nodes + 1)
        }
        self.device_fs = "dir"  # the nodes' devices (AioConfig keeps a cluster on directories)
        self.warnings: list[str] = []

    def _host(self, name: str, bind_ip: str) -> SwiftHost:
        base = self.root / name
        return SwiftHost(swift_dir=base / "etc", devices_dir=base / "srv",
                         cache_dir=base / "cache", storlets_dir=base / "storlets",
                         bind_ip=bind_ip)

    @property
    def proxies(self) -> list[str]:
        return self.proxy.proxies

    @property
    def swift_dir(self) -> Path:
        """The proxies' Swift directory (rings and configs as clients see them)."""
        return self.proxy.swift_dir

    def prepare(self) -> None:
        # Traversable: the sandbox user reaches each node's storlets/ through it.
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        (self.root / "rings").mkdir(mode=0o700, exist_ok=True)
        for layout in (self.proxy, *self.nodes.values()):
            layout.prepare()
        for n, layout in self.nodes.items():
            layout.rsyncd_conf(self.plan.node_address(n))
        devices = [RingDevice(zone=node_zone(n), ip=self.plan.node_address(n), device="d1")
                   for n in self.nodes]
        build_rings(self.root / "rings", [self.proxy.swift_dir,
                                          *(layout.swift_dir for layout in self.nodes.values())],
                    devices, 3, {kind: self.proxy.server_port(kind) for kind in RING_KINDS},
                    CLUSTER_PART_POWER)

    def processes(self) -> list[SwiftProcess]:
        """Every Swift process, node by node (servers, rsyncd, daemons), then the proxies."""
        procs = []
        for n, layout in self.nodes.items():
            enter = self.plan.enter(n)
            own = layout.processes()
            rsyncd = SwiftProcess(RSYNCD, ["rsync", "--daemon", "--no-detach",
                                           f"--config={layout.swift_dir / 'rsyncd.conf'}"],
                                  (self.plan.node_address(n), 873))
            for proc in (*own[:len(NODE_SERVERS)], rsyncd, *own[len(NODE_SERVERS):]):
                procs.append(SwiftProcess(f"{node_name(n)}-{proc.name}", enter + proc.argv,
                                          proc.address))
        return procs + self.proxy.processes()

    def replicate_once(self, timeout: float = 300) -> None:
        """Run one pass of every replicator on every node now, all at once.

        Raises ``subprocess.CalledProcessError`` for a pass that failed.
        """
        passes = [subprocess.Popen([*self.plan.enter(n), *layout.command(daemon), "once"],  # noqa: S603
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                  for n, layout in self.nodes.items() for daemon in REPLICATORS]
        for proc in passes:
            _out, err = proc.communicate(timeout=timeout)
            if proc.returncode:
                raise subprocess.CalledProcessError(proc.returncode, proc.args, stderr=err)

    def describe(self) -> list[dict[str, object]]:
        """The nodes as ``aio.json`` lists them."""
        return [{"name": node_name(n), "namespace": self.plan.node_ns(n),
                 "address": self.plan.node_address(n), "zone": node_zone(n),
                 "swift_dir": str(layout.swift_dir),
                 "devices": str(layout.devices_dir)}
                for n, layout in self.nodes.items()]


def cluster_process_names(config: AioConfig) -> list[str]:
    """The names ``Cluster.processes`` gives, from the config alone (for ``aio status``)."""
    names = []
    for n in range(1, config.nodes + 1):
        names += [f"{node_name(n)}-{s}" for s in (*NODE_SERVERS, RSYNCD, *NODE_DAEMONS)]
    return names + ["proxy", "proxy2"][:config.proxies]
