"""The cluster's network: storage nodes in network namespaces on a private bridge.

``ClusterNetwork(state_dir, nodes)`` creates, for ``iostack aio start --nodes N``::

    root namespace (proxies, controller, Redis, RabbitMQ, memcached)
      lo 127.0.0.1                      clients, proxies and services
      ios<h> 10.<a>.<b>.1/24 ──veth──┐   (the only address the stack adds here)
                                     │
    iostack-<h>-hub: bridge br0 ─ gw ┘ ─ n1 ─ n2 ─ n3
                                          │    │    │  (veth pairs)
    iostack-<h>-node1: eth0 10.<a>.<b>.11/24   node2: .12   node3: .13

``<h>`` is a hash of the state dir, so stacks in different state dirs (a
test session's and ``make run``'s) have their own namespaces and interfaces.
The subnet is chosen once among 10.248.0.0/24 .. 10.251.255.0/24 (the first
one no route of the root namespace overlaps, starting at the hash) and kept
in ``etc/cluster-net.json`` with every name created, so that ``destroy``
removes exactly those, also after a crash. Processes run in a node's
namespace through ``nsenter --net`` (only the network namespace changes:
mounts, cgroups and /proc stay the host's, as on a machine of its own with
shared disks). ``set_link(node, up)`` takes a node's interface down or up
(the fault tests' "node unplugged").
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from iostack.aio.saved import from_saved
from iostack.private_files import write_private_json

NETWORK_FILE = "etc/cluster-net.json"
SUBNETS = ipaddress.ip_network("10.248.0.0/14")  # /24s from 10.248.0.0 to 10.251.255.0
NODE_HOST_BASE = 10  # node i has host address .(10 + i)
BRIDGE = "br0"
NODE_IF = "eth0"
HUB_GATEWAY_IF = "gw"


class NetworkError(RuntimeError):
    """A namespace or interface could not be created; the message has ``ip``'s answer."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True,  # noqa: S603,S607
                          timeout=30, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def _routes_overlap(subnet: ipaddress.IPv4Network) -> bool:
    routes = json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if dst in ("", "default") or ":" in dst:
            continue
        try:
            if ipaddress.ip_network(dst, strict=False).overlaps(subnet):
                return True
        except ValueError:
            continue
    return False


@dataclass(frozen=True)
class NetworkPlan:
    """Names and addresses of one cluster network (what ``etc/cluster-net.json`` holds)."""

    tag: str
    subnet: str
    nodes: int

    @property
    def hub(self) -> str:
        return f"iostack-{self.tag}-hub"

    @property
    def root_if(self) -> str:
        return f"ios{self.tag}"  # 11 characters: interface names have at most 15

    def node_ns(self, node: int) -> str:
        return f"iostack-{self.tag}-node{node}"

    @property
    def gateway(self) -> str:
        """The root namespace's address on the cluster network (proxies and services)."""
        return str(ipaddress.ip_network(self.subnet)[1])

    def node_address(self, node: int) -> str:
        return str(ipaddress.ip_network(self.subnet)[NODE_HOST_BASE + node])

    def enter(self, node: int) -> list[str]:
        """The command prefix that runs a program in ``node``'s network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.node_ns(node)}", "--"]

    @property
    def namespaces(self) -> list[str]:
        return [self.hub, *(self.node_ns(n) for n in range(1, self.nodes + 1))]


class ClusterNetwork:
    """The namespaces, bridge and veth pairs of one state dir's cluster."""

    def __init__(self, state_dir: Path, nodes: int) -> None:
        self.path = state_dir / NETWORK_FILE
        self.tag = hashlib.sha256(str(state_dir).encode()).hexdigest()[:8]
        self.nodes = nodes
        saved = self.saved()
        self.plan = saved if saved and saved.nodes == nodes else None

    def saved(self) -> NetworkPlan | None:
        if not self.path.is_file():
            return None
        return from_saved(NetworkPlan, json.loads(self.path.read_text(encoding="utf-8")))

    def _choose_subnet(self) -> str:
        count = SUBNETS.num_addresses // 256
        start = int(self.tag, 16) % count
        for offset in range(count):
            subnet = ipaddress.ip_network(
                (int(SUBNETS.network_address) + ((start + offset) % count) * 256, 24))
            if not _routes_overlap(subnet):
                return str(subnet)
        raise NetworkError(f"no free /24 in {SUBNETS} for the cluster network")

    def exists(self) -> bool:
        """Whether every namespace and the root interface of the plan are there."""
        if self.plan is None:
            return False
        present = set(namespaces())
        return (all(ns in present for ns in self.plan.namespaces)
                and _ip("link", "show", self.plan.root_if, check=False).returncode == 0)

    def ensure(self) -> NetworkPlan:
        """Create the network unless it is complete; a partial one (a crash) is rebuilt."""
        if self.exists():
            return self._built()
        self.destroy()
        plan = NetworkPlan(self.tag, self._choose_subnet(), self.nodes)
        write_private_json(self.path, asdict(plan))  # before creating: destroy finds a crash's
        self.plan = plan
        try:
            self._create(plan)
        except NetworkError:
            self.destroy()
            raise
        return plan

    @staticmethod
    def _create(plan: NetworkPlan) -> None:
        prefix = ipaddress.ip_network(plan.subnet).prefixlen
        for ns in plan.namespaces:
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", plan.hub, "link", "add", BRIDGE, "type", "bridge")
        _ip("-n", plan.hub, "link", "set", BRIDGE, "up")
        _ip("link", "add", plan.root_if, "type", "veth", "peer", "name", HUB_GATEWAY_IF,
            "netns", plan.hub)
        _ip("-n", plan.hub, "link", "set", HUB_GATEWAY_IF, "master", BRIDGE, "up")
        _ip("addr", "add", f"{plan.gateway}/{prefix}", "dev", plan.root_if)
        _ip("link", "set", plan.root_if, "up")
        for node in range(1, plan.nodes + 1):
            ns = plan.node_ns(node)
            _ip("-n", plan.hub, "link", "add", f"n{node}", "type", "veth", "peer", "name",
                NODE_IF, "netns", ns)
            _ip("-n", plan.hub, "link", "set", f"n{node}", "master", BRIDGE, "up")
            _ip("-n", ns, "addr", "add", f"{plan.node_address(node)}/{prefix}", "dev", NODE_IF)
            _ip("-n", ns, "link", "set", NODE_IF, "up")

    def destroy(self) -> list[str]:
        """Remove every namespace and interface the saved plan names; return what was removed."""
        plan = self.saved()
        if plan is None:
            return []
        removed = []
        # Deleting the root end deletes its pair; namespaces then go with what is inside them.
        if _ip("link", "del", plan.root_if, check=False).returncode == 0:
            removed.append(plan.root_if)
        present = set(namespaces())
        for ns in plan.namespaces:
            if ns in present:
                _ip("netns", "del", ns)
                removed.append(ns)
        deadline = time.monotonic() + 10
        while _ip("link", "show", plan.root_if, check=False).returncode == 0:
            if time.monotonic() > deadline:
                raise NetworkError(f"{plan.root_if} is still there 10 s after deleting it")
            time.sleep(0.1)
        self.path.unlink(missing_ok=True)
        self.plan = None
        return removed

    def _built(self) -> NetworkPlan:
        if self.plan is None:
            raise RuntimeError("the cluster network is not built (run aio start)")
        return self.plan

    def set_link(self, node: int, up: bool) -> None:
        """Plug (``up``) or unplug a node's interface."""
        _ip("-n", self._built().node_ns(node), "link", "set", NODE_IF, "up" if up else "down")

    def link_up(self, node: int) -> bool:
        shown = json.loads(_ip("-j", "-n", self._built().node_ns(node), "link", "show",
                               NODE_IF).stdout)
        return "UP" in shown[0].get("flags", [])


def namespaces() -> list[str]:
    """Names of the host's network namespaces (``ip netns list``)."""
    listed = _ip("-j", "netns", "list", check=False).stdout.strip()
    return [entry["name"] for entry in json.loads(listed or "[]")]
