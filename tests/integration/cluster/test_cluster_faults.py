"""A three-node cluster under load loses nothing through node, proxy and service faults.

One module-scoped cluster (``conftest.py``: ``iostack aio start --nodes 3
--proxy-workers 2``, its own Redis, RabbitMQ and namespaces) serves tenants
t1 and t2, whose objects are stored compressed and encrypted, while load
threads PUT new objects and GET earlier ones through both proxies (a client that cannot
connect to one proxy tries the other, as a load balancer would):

(a) node2's link goes down for a while, then up: every request still
    succeeds at quorum; one replication pass heals node2;
(b) a proxy is killed: the other serves every request, and metrics keep
    arriving from it; ``aio start`` brings the killed one back;
(c) the controller and RabbitMQ are stopped and started again;
(d) the policy store (a master, two replicas, three Sentinels) goes through
    four faults in a row: the master killed for ``MASTER_DOWN`` seconds (a
    replica is promoted; ``aio start`` brings the old master back as a
    replica), the master hung with ``CLIENT PAUSE`` for ``HANG`` seconds, the
    master restarted empty (its data deleted, restarted at once, before the
    Sentinels call it down: the replicas copy the empty store), and
    ``FLUSHALL``. No tenant request fails in any of them, and none takes as
    long as the hang (requests never wait for the store): the proxies
    enforce their local copies, under a policy added just before the faults.
    A policy change made while no master is writable gets the controller's
    503 and is not applied; policy changes succeed again once a replica is
    promoted (the time is measured and printed) and reach every worker. The
    controller's guardian refills the store after the restart and the flush.

``MASTER_DOWN`` is 30 s, as long as an operator takes to notice; ``HANG``
is 10 s, twice Sentinel's ``down-after`` (so a hung master is also failed
over, and requests go on meanwhile).

At the end every object a PUT acknowledged reads back intact and has a
replica on every node, no ``.data`` file on any node's device holds the
plaintext marker, and every replica of an object written during a store
fault records encryption. The counts are printed and asserted.

Before the faults, on the same cluster, ``iostack doctor`` given the proxy
host's and every node's Swift directory finds both proxies' and the three
object servers' configs and no error (and the controller hears both
proxies); on a copy of those directories with node2's object stage removed
and two middlewares of the second proxy swapped it reports exactly these
two errors, each naming its file.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import swiftclient
from swift.obj.diskfile import read_metadata
from swift_confs import pipeline, read_conf, set_pipeline, write_conf

from iostack.aio.netns import ClusterNetwork
from iostack.aio.processes import ProcessManager
from iostack.aio.session import aio_command, redis_set_of, seconds_until_accepted
from iostack.controller.client import ControllerClient, ControllerError
from iostack.doctor.cli import diagnose, find_configs
from iostack.monitoring.bus import Consumer, metrics_exchange, wait_connected
from iostack.ports import wait_until
from iostack.stored_object import PIPELINE_HEADER

pytestmark = pytest.mark.integration

MARKER = b"IOSTACK-PLAINTEXT-MARKER"
TENANTS = ("t1", "t2")
POLICIES = {"t1": "SET COMPRESSION WITH algorithm=zstd, SET ENCRYPTION",
            "t2": "SET COMPRESSION WITH algorithm=gzip, SET ENCRYPTION"}
CONTAINER = "faults"
PROXY_WORKERS = 2
MASTER_DOWN = 30  # s the store's master stays killed
HANG = 10  # s the store's master is paused (CLIENT PAUSE)
STORE_FAULTS = ("redis master killed", "redis hung", "redis restarted empty", "redis flushed")
# Requests a phase must have made to say anything: the node and proxy faults, the store's.
QUORUM_REQUESTS = 21
FAULT_REQUESTS = 11


@dataclass
class Load:
    """Tenants' PUT/GET loop over both proxies, with what it saw."""

    info: dict[str, Any]
    phase: str = "warm-up"
    stop: threading.Event = field(default_factory=threading.Event)
    written: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, obj) -> md5
    written_in: dict[tuple[str, str], str] = field(default_factory=dict)  # -> phase of its PUT
    made: Counter = field(default_factory=Counter)  # phase -> requests
    failed: Counter = field(default_factory=Counter)  # phase -> requests failed at the client
    failures: Counter = field(default_factory=Counter)  # (phase, method, status)
    # (phase, method, status, transaction id, body) of failures, the first few of each phase
    examples: list[tuple[str, str, Any, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: dict[str, float] = field(default_factory=dict)  # phase -> when it began
    slowest: dict[str, float] = field(default_factory=dict)  # phase -> longest request, s

    def enter(self, phase: str) -> None:
        self.started[phase] = time.monotonic()
        self.phase = phase

    def durations(self) -> dict[str, float]:
        """Seconds each phase lasted (the last one until now)."""
        starts = sorted(self.started.items(), key=lambda item: item[1]) + [("", time.monotonic())]
        return {name: round(end - start, 1)
                for (name, start), (_next, end) in zip(starts, starts[1:], strict=False)}

    def connections(self, tenant: str) -> list[swiftclient.Connection]:
        creds = self.info["tenants"][tenant]
        return [swiftclient.Connection(authurl=f"{url}/auth/v1.0", user=creds["user"],
                                       key=creds["key"], retries=0, timeout=30)
                for url in self.info["proxy_urls"]]

    def run(self, tenant: str, seed: int) -> None:
        rng = random.Random(seed)
        conns = self.connections(tenant)
        n = 0
        while not self.stop.is_set():
            n += 1
            name = f"{tenant}-{seed}-{n}"
            body = MARKER + b" " + rng.randbytes(16) * rng.randint(64, 4096)
            self._request(conns, "PUT", lambda c, name=name, body=body:
                          c.put_object(CONTAINER, name, body),
                          on_ok=lambda name=name, body=body, phase=self.phase:
                          self._wrote(tenant, name, body, phase))
            with self.lock:
                done = [o for (t, o) in self.written if t == tenant]
            if done:
                old = rng.choice(done)
                self._request(conns, "GET", lambda c, old=old: self._check(c, tenant, old))
            time.sleep(0.02)

    def _wrote(self, tenant: str, name: str, body: bytes, phase: str) -> None:
        with self.lock:
            self.written[(tenant, name)] = hashlib.md5(body, usedforsecurity=False).hexdigest()
            self.written_in[(tenant, name)] = phase

    def _check(self, conn: swiftclient.Connection, tenant: str, name: str) -> None:
        body = conn.get_object(CONTAINER, name)[1]
        if hashlib.md5(body, usedforsecurity=False).hexdigest() != self.written[(tenant, name)]:
            raise AssertionError(f"{tenant}/{name} read back different bytes")

    def _request(self, conns, method: str, call, on_ok=lambda: None) -> None:
        phase = self.phase
        with self.lock:
            self.made[phase] += 1
        status, trans_id, body = None, "", ""
        began = time.monotonic()
        for conn in random.sample(conns, len(conns)):  # a load balancer's pick, then failover
            try:
                call(conn)
                on_ok()
                with self.lock:
                    self.slowest[phase] = max(self.slowest.get(phase, 0.0),
                                              time.monotonic() - began)
                return
            except swiftclient.ClientException as exc:
                status = exc.http_status
                if status is not None:  # the proxy answered: no failover for an HTTP error
                    trans_id = (exc.http_response_headers or {}).get("x-trans-id", "")
                    content = exc.http_response_content or b""
                    body = (content.decode(errors="replace") if isinstance(content, bytes)
                            else str(content))[:200]
                    break
            except OSError:
                status = "unreachable"
            except AssertionError:
                status = "corrupt"
                break
            conn.close()
            conn.url = conn.token = None  # authenticate again on the next try
        if self.phase != phase:
            # The next fault began while this request was on its way (a PUT sent
            # just before Redis stopped): it belongs to neither phase alone.
            phase = f"{phase} -> {self.phase}"
        with self.lock:
            self.failed[phase] += 1
            self.failures[(phase, method, status)] += 1
            if self.failed[phase] <= 3:
                self.examples.append((phase, method, status, trans_id, body))


@pytest.fixture(scope="module")
def load(cluster) -> Iterator[Load]:
    admin = ControllerClient(cluster["controller_url"], cluster["admin_token"])
    for tenant, actions in POLICIES.items():
        admin.add_policies(f"FOR TENANT {tenant} DO {actions}")
    for tenant in TENANTS:
        Load(cluster).connections(tenant)[0].put_container(CONTAINER)
    state = Load(cluster)
    threads = [threading.Thread(target=state.run, args=(tenant, seed), daemon=True)
               for seed, tenant in enumerate(TENANTS * 2)]
    for thread in threads:
        thread.start()
    yield state
    state.stop.set()
    for thread in threads:
        thread.join(60)


class Metrics:
    """Sources heard on the stack's metrics exchange, with when each was last heard."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.last: dict[str, float] = {}
        self.consumer = Consumer(info["amqp_url"], metrics_exchange(info["namespace"]),
                                 ["metrics.#"], self._handle)

    def _handle(self, _key: str, message: dict[str, Any]) -> None:
        self.last[message["source"]] = time.monotonic()

    def heard_since(self, since: float, prefix: str = "") -> set[str]:
        return {s for s, t in list(self.last.items()) if t > since and s.startswith(prefix)}


@pytest.fixture(scope="module")
def metrics(cluster) -> Iterator[Metrics]:
    heard = Metrics(cluster)
    heard.consumer.start()
    assert wait_connected([heard.consumer], 30)
    yield heard
    heard.consumer.stop()


def run_phase(load: Load, name: str, seconds: float, fault=lambda: None,
              min_requests: int = 0) -> None:
    """Enter phase ``name``, cause its ``fault``, and let the load run ``seconds``, and
    on until it made ``min_requests`` (a loaded machine serves fewer in the same time:
    a phase must see enough requests to mean something; at most two minutes more).

    The phase is entered first: a request that meets a service going down
    counts in that service's phase, not in the calm phase before it.
    """
    load.enter(name)
    fault()
    time.sleep(seconds)
    deadline = time.monotonic() + 120
    while load.made.get(name, 0) < min_requests and time.monotonic() < deadline:
        time.sleep(0.2)


def wait_for(check, timeout: float, what: str, seen=None) -> None:
    """Wait until ``check()``; on timeout fail naming ``what`` (and ``seen()``, what was there)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, \
            f"not within {timeout:.0f}s: {what}" + (f"; seen: {seen()}" if seen else "")
        time.sleep(0.5)


def count_lost(load: Load, objects: list[tuple[tuple[str, str], str]]) -> int:
    """How many of ``objects`` ((tenant, name), md5) do not read back intact."""
    readers = {tenant: load.connections(tenant) for tenant in TENANTS}
    lost = 0
    for n, ((tenant, name), md5) in enumerate(objects):
        try:
            body = readers[tenant][n % 2].get_object(CONTAINER, name)[1]
        except swiftclient.ClientException:
            lost += 1
            continue
        lost += hashlib.md5(body, usedforsecurity=False).hexdigest() != md5
    return lost


def stored_replicas(cluster: dict[str, Any]) -> dict[str, dict[str, bytes]]:
    """Node name -> {object path: its .data bytes} for every object on that node's device."""
    found: dict[str, dict[str, bytes]] = {}
    for node in cluster["nodes"]:
        found[node["name"]] = {}
        for data in Path(node["devices"]).glob("*/objects/*/*/*/*.data"):
            with open(data, "rb") as f:
                found[node["name"]][read_metadata(f)["name"]] = f.read()
    return found


def stored_records(cluster: dict[str, Any]) -> dict[str, list[list[dict[str, Any]]]]:
    """Object path -> the filter record of each of its replicas, on every node."""
    found: dict[str, list[list[dict[str, Any]]]] = {}
    for node in cluster["nodes"]:
        for data in Path(node["devices"]).glob("*/objects/*/*/*/*.data"):
            with open(data, "rb") as f:
                metadata = read_metadata(f)
            found.setdefault(metadata["name"], []).append(
                json.loads(metadata.get(PIPELINE_HEADER, "[]")))
    return found


def log_lines(cluster: dict[str, Any], trans_id: str) -> list[str]:
    """The lines of every server's log (proxies' and nodes') that name ``trans_id``."""
    if not trans_id:
        return []
    return [f"  {path.name}: {line}" for path in sorted(Path(cluster["log_dir"]).glob("*.log"))
            for line in path.read_text(errors="replace").splitlines(keepends=True)
            if trans_id in line]


def serves(conn: swiftclient.Connection) -> bool:
    """Whether a PUT and a GET through this connection succeed now."""
    try:
        conn.put_object(CONTAINER, "probe", MARKER)
        return conn.get_object(CONTAINER, "probe")[1] == MARKER
    except (swiftclient.ClientException, OSError):
        conn.close()
        conn.url = conn.token = None
        return False


def store_state(cluster: dict[str, Any]) -> dict[str, Any]:
    """What each Redis server holds and the controller last said of the store (a failure's
    report)."""
    members = redis_set_of(Path(cluster["state_dir"]))
    servers = {}
    for name, port in members.ports.items():
        try:
            client = redis.Redis("127.0.0.1", port, password=members.password, socket_timeout=1)
            role = client.execute_command("ROLE")[0]
            servers[name] = (role, None if name.startswith("sentinel") else client.dbsize())
        except redis.RedisError as exc:
            servers[name] = str(exc)
    log = (Path(cluster["log_dir"]) / "controller.log").read_text(errors="replace")
    return {"servers": servers, "master": members.current_master(),
            "controller": [line for line in log.splitlines() if "store" in line][-8:]}


def restores(cluster: dict[str, Any]) -> int:
    """How many times the controller's guardian refilled an unmarked store."""
    log = Path(cluster["log_dir"]) / "controller.log"
    return log.read_text(errors="replace").count("had lost its marker")


def kill_master(cluster: dict[str, Any], load: Load, admin: ControllerClient) -> float:
    """The master killed for ``MASTER_DOWN`` s; return the seconds until a policy change
    succeeded again (a replica promoted, the controller following it)."""
    members = redis_set_of(Path(cluster["state_dir"]))
    processes = members.processes
    master = members.member_at(members.current_master())
    killed = time.monotonic()
    run_phase(load, "redis master killed", 0, lambda: stop(processes, master))
    # No master is writable yet: the controller's 503, nothing applied.
    with pytest.raises(ControllerError) as refused:
        admin.add_policies(f"FOR CONTAINER AUTH_t2/{CONTAINER} DO SET NOOP")
    assert refused.value.status == 503 and "policy store (Redis) unavailable" in \
        str(refused.value), refused.value
    writable = seconds_until_accepted(admin, "FOR CONTAINER AUTH_t3/failover DO SET NOOP",
                                      killed, MASTER_DOWN)
    assert writable is not None, f"no policy change succeeded within {MASTER_DOWN} s"
    assert members.current_master() != members.ports[master]
    # The change made through the promoted master reaches every worker.
    wait_for(lambda: admin.policy_status()["converged"], 30,
             "every proxy worker enforcing the change made after the failover",
             lambda: admin.policy_status())
    time.sleep(max(0.0, MASTER_DOWN - (time.monotonic() - killed)))
    start_again(cluster)  # the old master comes back as a replica of the promoted one
    assert processes.find(master) and members.current_master() != members.ports[master]
    run_phase(load, "redis master back", 3)
    assert not [p for p in admin.policies() if "AUTH_t2" in p["text"]]
    return writable


def restart_master_empty(cluster: dict[str, Any], load: Load) -> None:
    """The master's data deleted and the master restarted at once, as a supervisor
    would, before the Sentinels call it down: it and its replicas hold nothing."""
    members = redis_set_of(Path(cluster["state_dir"]))
    master = members.member_at(members.current_master())
    proc = members.processes.find(master)
    assert proc is not None
    data = Path(cluster["state_dir"]) / "redis" / master

    def fault() -> None:
        os.killpg(proc.pid, 9)
        assert wait_until(lambda: members.processes.find(master) is None, 5, 0.01)
        shutil.rmtree(data)
        members.start()  # as `aio start` does: the Sentinels still name it the master

    run_phase(load, "redis restarted empty", 5, fault, min_requests=FAULT_REQUESTS)


def on_master(cluster: dict[str, Any], *command: str) -> Any:
    """``command`` on the master the Sentinels name now, on a connection of its own (a
    pooled one may still point at a demoted master)."""
    members = redis_set_of(Path(cluster["state_dir"]))
    client = redis.Redis("127.0.0.1", members.current_master(), password=members.password,
                         socket_timeout=5)
    try:
        return client.execute_command(*command)
    finally:
        client.close()


def store_faults(cluster: dict[str, Any], load: Load, admin: ControllerClient) -> float:
    """(d) of the module docstring; return the seconds until policy changes succeeded
    again after the master was killed."""
    writable = kill_master(cluster, load, admin)
    marker = f"{cluster['key_prefix']}marker"
    run_phase(load, "redis hung", HANG + 2,
              lambda: on_master(cluster, "CLIENT", "PAUSE", str(HANG * 1000), "ALL"),
              min_requests=FAULT_REQUESTS)
    for fault in (lambda: restart_master_empty(cluster, load),
                  lambda: run_phase(load, "redis flushed", 3,
                                    lambda: on_master(cluster, "FLUSHALL"),
                                    min_requests=FAULT_REQUESTS)):
        before = restores(cluster)
        fault()
        wait_for(lambda before=before: restores(cluster) > before
                 and on_master(cluster, "EXISTS", marker), 30,
                 "the guardian refilling the emptied store", lambda: store_state(cluster))
    run_phase(load, "redis restored", 3)
    return writable


def stop(processes: ProcessManager, service: str) -> None:
    assert processes.stop(service), f"{service} was not running"


def start_again(cluster: dict[str, Any]) -> None:
    """``iostack aio start`` on the running stack: starts what is missing, keeps the rest."""
    restarted = aio_command("start", Path(cluster["state_dir"]))
    assert restarted.returncode == 0, restarted.stderr


def swift_dirs(cluster: dict[str, Any]) -> list[str]:
    """The proxy host's Swift directory, then each node's: what an operator gives doctor."""
    return [cluster["swift_dir"], *(node["swift_dir"] for node in cluster["nodes"])]


# The doctor tests come before the faults test (pytest runs a module's tests in file
# order): it stops and starts services and leaves the stack as `aio start` brings it back.


def test_doctor_finds_every_config_of_the_cluster_and_no_error(cluster):
    proxies, objects = find_configs(swift_dirs(cluster))
    etc = Path(cluster["swift_dir"])
    assert proxies == [str(etc / "proxy-server-2.conf"), str(etc / "proxy-server.conf")]
    assert objects == [str(Path(node["swift_dir"]) / "object-server.conf")
                       for node in cluster["nodes"]]
    for conn in Load(cluster).connections("t1"):
        conn.head_account()  # a proxy's worker publishes after its first tenant request
    heard: list[str] = []

    def check() -> bool:
        findings = diagnose(proxies, objects, cluster["controller_url"], cluster["admin_token"])
        assert [f for f in findings if f.level == "error"] == []
        heard[:] = [f.what for f in findings if f.level == "ok" and "hears metrics" in f.what]
        return len(heard) == len(proxies)

    assert wait_until(check, 30, 1), f"the controller heard only: {heard}"


def test_doctor_names_each_fault_in_a_broken_copy_of_the_cluster(cluster, tmp_path):
    copies = []
    for source in swift_dirs(cluster):
        copies.append(tmp_path / Path(source).parent.name)  # proxy, node1, ...
        shutil.copytree(source, copies[-1])
    node2 = tmp_path / "node2" / "object-server.conf"
    conf = read_conf(node2)
    set_pipeline(conf, [name for name in pipeline(conf) if name != "iostack"])
    write_conf(conf, node2)
    proxy2 = tmp_path / "proxy" / "proxy-server-2.conf"
    conf = read_conf(proxy2)
    names = pipeline(conf)
    at = names.index("iostack")
    assert names[at + 1] == "iostack_cache"
    names[at:at + 2] = ["iostack_cache", "iostack"]
    set_pipeline(conf, names)
    write_conf(conf, proxy2)

    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "doctor",
         *(f"--swift-dir={d}" for d in copies), "--controller", cluster["controller_url"],
         f"--token={cluster['admin_token']}", "--json"],
        capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    findings = json.loads(done.stdout)
    assert sorted((f["where"], f["what"].split(":")[0]) for f in findings
                  if f["level"] == "error") == [
        (f"{node2} [pipeline:main]", "no iostack_object middleware"),
        (f"{proxy2} [pipeline:main]", "iostack_cache sits above iostack"),
    ]
    # Every copied host's configs were read: the unbroken ones pass their checks.
    passed = {f["where"] for f in findings
              if f["level"] == "ok" and f["what"].startswith("IOStack middlewares present")}
    assert passed == {f"{path} [pipeline:main]" for path in (
        tmp_path / "proxy" / "proxy-server.conf",
        *(tmp_path / f"node{n}" / "object-server.conf" for n in (1, 3)))}


def test_faults_lose_nothing_and_store_nothing_unfiltered(cluster, load, metrics):
    state_dir = Path(cluster["state_dir"])
    processes = ProcessManager(state_dir)
    network = ClusterNetwork(state_dir, 3)
    run_phase(load, "steady", 5)

    # Every proxy worker and every object node publishes metrics.
    since = time.monotonic()

    def every_worker_heard() -> bool:
        # A worker's reporter starts with its first tenant request, and the load's
        # keep-alive connections may all sit on one worker: new connections reach
        # the others.
        for conn in Load(cluster).connections("t1"):
            conn.head_account()
            conn.close()
        return len(metrics.heard_since(since, "proxy-")) == 2 * PROXY_WORKERS

    wait_for(every_worker_heard, 30, "metrics from every worker of both proxies",
             lambda: sorted(metrics.heard_since(since, "proxy-")))
    wait_for(lambda: {s.split(":")[0] for s in metrics.heard_since(since, "object-")}
             == {f"object-{node['address']}" for node in cluster["nodes"]}, 30,
             "metrics from every storage node")

    # (a) node2 unplugged, then back; one replication pass heals it.
    run_phase(load, "node down", 12, lambda: network.set_link(2, up=False),
              min_requests=QUORUM_REQUESTS)
    network.set_link(2, up=True)
    run_phase(load, "node back", 5)

    # (b) a proxy killed: the other serves, and its workers keep publishing.
    killed = processes.find("proxy2")
    assert killed is not None
    run_phase(load, "proxy killed", 6, lambda: os.killpg(killed.pid, 9),
              min_requests=QUORUM_REQUESTS)
    since = time.monotonic()
    wait_for(lambda: len(metrics.heard_since(since, "proxy-")) == PROXY_WORKERS, 15,
             "metrics from the surviving proxy's workers")
    start_again(cluster)
    run_phase(load, "proxy back", 5)

    # (c) the controller and RabbitMQ restarted, and (d) the policy store's faults.
    probe = load.connections("t1")[0]
    admin = ControllerClient(cluster["controller_url"], cluster["admin_token"])
    writable = 0.0
    for service in ("controller", "redis", "rabbitmq"):
        if service == "redis":
            # A policy added just before the faults: every worker enforces it during them.
            admin.add_policies(f"FOR CONTAINER AUTH_t1/{CONTAINER} DO SET COMPRESSION "
                               "WITH algorithm=gzip")
            wait_for(lambda: admin.policy_status()["converged"], 30,
                     "every proxy worker enforcing the new policy",
                     lambda: admin.policy_status())
            writable = store_faults(cluster, load, admin)
            continue
        if service == "rabbitmq":
            # A worker's reporter starts with its first tenant request: the workers
            # publishing now (every one that served a request) must publish again.
            publishing = metrics.heard_since(time.monotonic() - 3, "proxy-")
            assert len({source.rsplit("-", 1)[0] for source in publishing}) == 2, publishing
        run_phase(load, f"{service} down", 6, lambda service=service: stop(processes, service))
        start_again(cluster)
        load.enter(f"{service} returning")
        wait_for(lambda: serves(probe), 60, f"the stack serving again after {service}")
        run_phase(load, f"{service} back", 5)
    since = time.monotonic()
    wait_for(lambda: publishing <= metrics.heard_since(since, "proxy-"), 60,
             f"metrics after the broker's restart from every worker publishing before it "
             f"({sorted(publishing)})", lambda: sorted(metrics.heard_since(since, "proxy-")))
    load.enter("replication")
    load.stop.set()
    time.sleep(2)
    replicated = aio_command("replicate", state_dir)
    assert replicated.returncode == 0, replicated.stderr

    # Every acknowledged object reads back intact, through either proxy.
    load.enter("checks")
    with ThreadPoolExecutor(4) as pool:
        lost = sum(pool.map(lambda part: count_lost(load, part),
                            [sorted(load.written.items())[i::4] for i in range(4)]))
    replicas = stored_replicas(cluster)
    paths = {f"/AUTH_{tenant}/{CONTAINER}/{name}" for tenant, name in load.written}
    missing = sum(len(paths - set(on_node)) for on_node in replicas.values())
    unfiltered = sum(MARKER in data for on_node in replicas.values()
                     for data in on_node.values())
    durations = load.durations()
    print(f"\nrequests made: {sum(load.made.values())} {dict(load.made)}")
    print(f"failed at the client: {sum(load.failed.values())} {dict(load.failed)}")
    print(f"failures by phase, method and status: {dict(load.failures)}")
    print(f"seconds per phase: {durations}")
    print(f"longest request per phase (s): "
          f"{ {phase: round(t, 2) for phase, t in load.slowest.items()} }")
    print(f"master killed -> policy changes succeed again: {writable:.1f} s")
    for example in load.examples:
        print("failure (phase, method, status, transaction, body):", example)
        print("".join(log_lines(cluster, example[3])), end="")
    print(f"objects acknowledged: {len(load.written)}, lost: {lost}, replicas missing after "
          f"replication: {missing}, replicas unfiltered on disk: {unfiltered} "
          f"(of {sum(len(n) for n in replicas.values())})")

    assert lost == 0
    assert unfiltered == 0
    assert missing == 0
    assert load.made["node down"] >= QUORUM_REQUESTS
    assert load.made["proxy killed"] >= QUORUM_REQUESTS
    assert all(load.made[phase] >= FAULT_REQUESTS for phase in STORE_FAULTS), dict(load.made)
    # A hung store never holds a request: none took as long as the hang.
    assert load.slowest["redis hung"] < HANG, load.slowest
    # Written while the store was killed, hung, emptied or flushed: encrypted on every
    # replica, and t1's under the policy added just before (gzip over its zstd).
    records = stored_records(cluster)
    during = {(tenant, f"/AUTH_{tenant}/{CONTAINER}/{name}")
              for (tenant, name), phase in load.written_in.items() if phase in STORE_FAULTS}
    assert {tenant for tenant, _path in during} == set(TENANTS)
    assert {path for _tenant, path in during
            if len(records.get(path, [])) != 3
            or not all(any(e["name"] == "encryption" for e in r) for r in records[path])} == set()
    assert {path for tenant, path in during if tenant == "t1" and {
        e["params"].get("algorithm") for r in records[path] for e in r
        if e["name"] == "compression"} != {"gzip"}} == set()
    # Quorum and failover: the node and the proxy faults cost no request; neither do
    # the controller (not on the data path), Redis (every worker enforces its local
    # copy of the policies) nor the broker (metrics wait in a buffer).
    assert sum(load.failed.values()) == 0, dict(load.failures)
