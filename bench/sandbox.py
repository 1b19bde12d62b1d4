"""Sandboxed filters against native ones and plain Swift, measured side by side in one run.

    .venv/bin/python bench/sandbox.py [--repeat 3] [--seconds 1] [--cold 3] [--no-docker]

GETs by one client of 1 KiB and 10 MiB objects, in these configurations,
alternating within every repetition so noise hits them alike:

- ``plain``              no policy on the container (the IOStack proxy passes through)
- ``native-noop``        policy ``SET NOOP``: the filter runs in the proxy middleware
- ``sandbox-object``     noop as a storlet in the bubblewrap sandbox, at the object node
                         (the Storlets API: ``X-Run-Storlet``)
- ``sandbox-proxy``      the same storlet run on the proxy (``X-Storlet-Run-On-Proxy``)
- ``datapath-sandboxed`` policy ``SET NOOP SANDBOXED``: the IOStack proxy middleware runs
                         the same storlet itself (``SandboxRunner``), on PUT and on GET;
                         the bench checks that the stored record says it ran sandboxed
- ``uploaded-protocol``  a tenant's pass-through that speaks IOStack's protocol itself
                         (``bench/storlets/identity_protocol.py``), uploaded, by policy
- ``uploaded-storlets-api`` a pass-through written to the plain Storlets API
                         (``bench/storlets/identity_storlets_api.py``), uploaded, by policy:
                         the protocol is the runtime's (``storlets_api``)
- ``docker-plain``       a second stack, started by the bench with ``--sandbox docker``
                         (Storlets' docker gateway, containers of its own Podman
                         service): no policy, its baseline
- ``docker-object``, ``docker-proxy``, ``docker-datapath``: ``sandbox-object``,
                         ``sandbox-proxy`` and ``datapath-sandboxed`` on that stack

Warm: the sandbox and the storlet daemon are up. Printed per configuration as
medians over repetitions: throughput relative to its stack's plain GET in the
same repetition (``plain``; ``docker-plain`` for the docker rows, and
``docker-plain`` itself against ``plain``), and the latency added to it at
p50 and p95.

Cold: the first GET after tearing the tenant's sandbox down (bubblewrap,
agent, storlet daemon all start; on the docker stack: the container), and
after re-uploading the storlet (the sandbox is up; only the storlet daemon
restarts), to show what dominates.
Targets from the issue: warm sandboxed 10 MiB GET >= 0.6 of plain, warm
added p50 <= 15 ms at 1 KiB.
"""

from __future__ import annotations

import argparse
import configparser
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import (
    CHECKOUT,
    Client,
    Policies,
    auth,
    body_of,
    human_size,
    print_table,
    run_clients,
    stack,
)
from swift.common import direct_client, utils
from swift.common.ring import Ring
from swiftclient.client import Connection

from iostack.aio.session import started_stack
from iostack.storlet_runtime.host import packaging
from iostack.storlet_runtime.host.container import ContainerScope
from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.host.sandbox import ScopeSandbox
from iostack.storlet_runtime.host.swift_conf import gateway_conf_path

TENANT = "t2"  # its own Storlets scope, so tearing it down does not disturb t1's tests
SIZES = (1 << 10, 10 << 20)
CONFIGS = ("plain", "native-noop", "sandbox-object", "sandbox-proxy", "datapath-sandboxed",
           "uploaded-protocol", "uploaded-storlets-api")
# The docker stack's configurations: name -> the bubblewrap stack's that it repeats there.
DOCKER = {"docker-plain": "plain", "docker-object": "sandbox-object",
          "docker-proxy": "sandbox-proxy", "docker-datapath": "datapath-sandboxed"}
UPLOADED = {"uploaded-protocol": "identity_protocol.IdentityFilter",
            "uploaded-storlets-api": "identity_storlets_api.IdentityStorlet"}
HERE = Path(__file__).resolve().parent


def sandbox_of(info: dict, scope: str) -> ScopeSandbox:
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(gateway_conf_path(Path(info["swift_dir"])))
    host_root = conf["DEFAULT"].get("host_root")
    scope_class = ContainerScope if info.get("sandbox") == "docker" else ScopeSandbox
    return scope_class(Path(conf["DEFAULT"].get("sandbox_run_dir",
                                                f"{host_root}/sandboxes")), scope)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Side:
    """One stack's tenant: its client settings, containers and policies."""

    def __init__(self, info: dict, run_id: str, configs: tuple[str, ...]) -> None:
        self.info = info
        self.url, self.token = auth(info, TENANT)
        self.conn = Connection(preauthurl=self.url, preauthtoken=self.token)
        self.storlet = packaging.deploy_filter(self.conn, "noop")
        self.policies = Policies(info)
        self.containers = {"plain": f"sbx-plain-{run_id}"}
        if "native-noop" in configs:
            self.containers["native-noop"] = f"sbx-noop-{run_id}"
        self.containers["datapath-sandboxed"] = f"sbx-dpsb-{run_id}"
        self.containers |= {c: f"sbx-{c}-{run_id}" for c in UPLOADED if c in configs}
        for container in self.containers.values():
            self.conn.put_container(container)
        for config, main in UPLOADED.items():
            if config in configs:
                name = upload(info, main, f"b{config[9:12]}{run_id}")
                self.policies.add(f"FOR CONTAINER AUTH_{TENANT}/{self.containers[config]} "
                                  f"DO SET {name}")
        if "native-noop" in configs:
            self.policies.add(f"FOR CONTAINER AUTH_{TENANT}/{self.containers['native-noop']} "
                              "DO SET NOOP")
        self.policies.add(f"FOR CONTAINER AUTH_{TENANT}/{self.containers['datapath-sandboxed']} "
                          "DO SET NOOP SANDBOXED")

    def clean(self) -> None:
        for container in self.containers.values():
            for obj in self.conn.get_container(container)[1]:
                self.conn.delete_object(container, obj["name"])
            self.conn.delete_container(container)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--cold", type=int, default=3, help="cold starts of each kind")
    parser.add_argument("--no-docker", action="store_true",
                        help="bubblewrap only (no second stack with the docker runtime)")
    args = parser.parse_args()

    with stack() as info, docker_stack(not args.no_docker) as docker_info:
        run_id = uuid.uuid4().hex[:6]
        sides = {"bubblewrap": Side(info, run_id, CONFIGS)}
        if docker_info:
            sides["docker"] = Side(docker_info, run_id, ("plain",))
        try:
            run(sides, args)
            for name, side in sides.items():
                cold(name, side, args.cold)
            for side in sides.values():
                side.clean()
        finally:
            for side in sides.values():
                side.policies.remove_all()


@contextmanager
def docker_stack(wanted: bool) -> Iterator[dict | None]:
    """A second stack of this run whose sandbox runtime is docker (Podman), or None."""
    if not wanted:
        yield None
        return
    state_dir = CHECKOUT / ".iostack-bench" / f"docker-{os.getpid()}"
    with started_stack(state_dir, "--sandbox", "docker",
                       "--namespace", f"bench-docker-{os.getpid()}") as info:
        yield info


def upload(info: dict, main: str, name: str) -> str:
    """``iostack filter upload`` of ``bench/storlets/<module>.py`` for the tenant; its name."""
    module = main.split(".")[0]
    subprocess.run(  # noqa: S603 - fixed argv: this interpreter, this package's CLI
        [sys.executable, "-m", "iostack.cli", "filter", "upload",
         str(HERE / "storlets" / f"{module}.py"), "--name", name, "--main", main,
         "--tenant", TENANT], check=True, timeout=600,
        env={**os.environ, "IOSTACK_STATE_DIR": info["state_dir"]})
    return name


def requests_for(side: Side, prefix: str = "") -> dict[str, tuple[Side, str, dict[str, str]]]:
    """Config name -> (side, path, headers) of a GET of ``obj`` (``prefix``: docker rows)."""
    decode = packaging.storlet_headers("noop", "decode")
    plain = f"{side.containers['plain']}/obj"
    found = {
        "plain": (plain, {}),
        "sandbox-object": (plain, decode),
        "sandbox-proxy": (plain, {**decode, "X-Storlet-Run-On-Proxy": ""}),
        "datapath-sandboxed": (f"{side.containers['datapath-sandboxed']}/obj", {}),
        **{config: (f"{side.containers[config]}/obj", {}) for config in side.containers
           if config not in ("plain", "datapath-sandboxed")},
    }
    if not prefix:
        return {config: (side, *found[config]) for config in CONFIGS}
    return {config: (side, *found[base]) for config, base in DOCKER.items()}


def put_through_sandbox(side: Side, container: str, body: bytes) -> None:
    """PUT ``obj`` until its stored record says the data path ran its filter in the sandbox.

    A new policy reaches the proxy within about a second; a PUT before that is stored plain.
    """
    info = side.info
    utils.set_swift_dir(info["swift_dir"])
    account = f"AUTH_{TENANT}"
    part, nodes = Ring(info["swift_dir"], ring_name="object").get_nodes(account, container, "obj")
    for _ in range(20):
        side.conn.put_object(container, "obj", body)
        headers = direct_client.direct_head_object(nodes[0], part, account, container, "obj")
        record = headers.get("X-Object-Sysmeta-Iostack-Pipeline", "")
        if '"iostack.runtime":"storlet"' in record:
            return
        time.sleep(0.25)
    raise SystemExit(f"{container}/obj was not written through the sandbox: {record!r}")


def baseline(config: str) -> str:
    """The configuration a row is compared with: its own stack's plain GET."""
    return "docker-plain" if config in DOCKER and config != "docker-plain" else "plain"


def run(sides: dict[str, Side], args) -> None:
    targets = requests_for(sides["bubblewrap"])
    if "docker" in sides:
        targets |= requests_for(sides["docker"], "docker-")
    configs = list(targets)
    for size in SIZES:
        body = body_of(size)
        for side in sides.values():
            for config, container in side.containers.items():
                if config == "plain" or config == "native-noop":
                    side.conn.put_object(container, "obj", body)
                else:
                    put_through_sandbox(side, container, body)
        for side, path, headers in targets.values():  # check and warm every path once
            client = Client(side.url, side.token)
            if client.request("GET", path, headers=headers)[1] != body:
                raise SystemExit(f"GET {path} with {headers}: wrong body")
            client.close()
        ratios = {c: [] for c in configs}
        added50 = {c: [] for c in configs}
        added95 = {c: [] for c in configs}
        plain_p50 = []
        for _ in range(args.repeat):
            results = {}
            for config in configs:
                side, path, headers = targets[config]

                def op(client, index, n, path=path, headers=headers):
                    return len(client.request("GET", path, headers=headers)[1])

                results[config] = run_clients(1, args.seconds, op,
                                              lambda side=side: Client(side.url, side.token))
            plain_p50.append(statistics.median(results["plain"].latencies) * 1000)
            for config, result in results.items():
                base = results[baseline(config)]
                ratios[config].append(result.mb_per_s / base.mb_per_s)
                added50[config].append((statistics.median(result.latencies)
                                        - statistics.median(base.latencies)) * 1000)
                added95[config].append((percentile(result.latencies, 0.95)
                                        - percentile(base.latencies, 0.95)) * 1000)
        print(f"\nwarm GET {human_size(size)}, 1 client, medians of {args.repeat} repetitions "
              f"(plain p50 {statistics.median(plain_p50):.1f} ms; load average "
              f"{os.getloadavg()[0]:.1f})")
        print_table(["config", "x its plain throughput", "added p50 ms", "added p95 ms"],
                    [[c, statistics.median(ratios[c]), statistics.median(added50[c]),
                      statistics.median(added95[c])] for c in configs])


def cold(runtime: str, side: Side, times: int) -> None:
    sandbox = sandbox_of(side.info, sandbox_scope(f"AUTH_{TENANT}"))
    decode = packaging.storlet_headers("noop", "decode")
    plain_c, conn, storlet = side.containers["plain"], side.conn, side.storlet
    url, token = side.url, side.token
    conn.put_object(plain_c, "small", body_of(1 << 10))
    full, daemon_only, refused = [], [], 0
    for _ in range(times):
        sandbox.stop()
        try:
            full.append(timed_get(url, token, f"{plain_c}/small", decode))
        except RuntimeError as exc:  # a start slower than the request's timeout (a loaded host)
            print(f"cold start ({runtime}) refused: {exc}")
            refused += 1
            continue
        # A newer upload makes the gateway restart the storlet daemon, not the sandbox.
        time.sleep(1.1)
        conn.put_object("storlet", storlet.name, storlet.code, headers=storlet.headers)
        daemon_only.append(timed_get(url, token, f"{plain_c}/small", decode))
    warm = statistics.median(timed_get(url, token, f"{plain_c}/small", decode)
                             for _ in range(5))
    what = "container + agent + daemon" if runtime == "docker" else "bwrap + agent + daemon"
    print(f"\ncold start ({runtime}), 1 KiB GET at the object node, medians of {times}")
    print_table(["first GET after", "seconds"], [
        [f"sandbox torn down ({what})", statistics.median(full) if full else "-"],
        ["  of which refused (slower than the timeout)", refused],
        ["storlet re-uploaded (daemon only)", statistics.median(daemon_only)],
        ["nothing (warm)", warm],
    ])


def timed_get(url: str, token: str, path: str, headers: dict[str, str]) -> float:
    client = Client(url, token)
    try:
        t0 = time.perf_counter()
        client.request("GET", path, headers=headers)
        return time.perf_counter() - t0
    finally:
        client.close()


if __name__ == "__main__":
    main()
