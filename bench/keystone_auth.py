"""Keystone auth against tempauth on the same Swift, measured side by side in one run.

    .venv/bin/python bench/keystone_auth.py [--repeat 5] [--seconds 1] [--clients 1,4]

Starts a private all-in-one with ``--auth keystone`` (its proxy runs
``authtoken s3api s3token keystoneauth`` and IOStack, no policy) and a second
proxy on the same servers with the all-in-one's tempauth pipeline instead,
everything else equal. Each repetition runs both in alternation: PUT and GET
of 1 KiB and 10 MiB objects, each tenant token reused (authtoken caches a
validated token in memcached, so Keystone is asked once per token, not per
request). Prints, as medians over repetitions, Keystone's throughput divided
by tempauth's in the same repetition (1.0: no cost), and tempauth's absolute
figures for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import urllib.request
import uuid
from configparser import ConfigParser
from pathlib import Path

from common import CHECKOUT, Client, body_of, human_size, print_table, put_get_ops, run_clients

from iostack.aio.keystone import default_venv
from iostack.aio.processes import ProcessManager
from iostack.aio.session import started_stack
from iostack.aio.stack import keystone_token
from iostack.aio.swift import PROXY_PIPELINE
from iostack.endpoints import default_state_dir
from iostack.ports import free_port, port_open, wait_until

TEMPAUTH_PROXY = "bench-tempauth-proxy"
SIZES = (1 << 10, 10 << 20)


def start_tempauth_proxy(info: dict, manager: ProcessManager) -> int:
    """A proxy like the stack's, with tempauth (its section is in every proxy config)."""
    swift_dir = Path(info["swift_dir"])
    conf = ConfigParser(interpolation=None)
    conf.read(swift_dir / "proxy-server.conf")
    conf["pipeline:main"]["pipeline"] = " ".join(PROXY_PIPELINE)
    port = free_port()
    conf["DEFAULT"]["bind_port"] = str(port)
    path = swift_dir / f"{TEMPAUTH_PROXY}.conf"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
              encoding="utf-8") as f:
        conf.write(f)
    manager.start(TEMPAUTH_PROXY, [sys.executable, "-m", "iostack.aio.swift_launcher",
                                   str(swift_dir), str(path), "proxy-server"])
    if not wait_until(lambda: port_open("127.0.0.1", port), 60):
        raise RuntimeError(f"{TEMPAUTH_PROXY} did not start; see "
                           f"{manager.log_file(TEMPAUTH_PROXY)}")
    return port


def tempauth_login(port: int, state_dir: Path, tenant: str) -> tuple[str, str]:
    """Storage URL and token of the tenant's tempauth user on that proxy."""
    secrets = json.loads((state_dir / "etc" / "secrets.json").read_text(encoding="utf-8"))
    request = urllib.request.Request(  # noqa: S310 - our own loopback proxy
        f"http://127.0.0.1:{port}/auth/v1.0",
        headers={"X-Auth-User": f"{tenant}:user", "X-Auth-Key": secrets[f"{tenant}_key"]})

    login: list[tuple[str, str]] = []

    def answered() -> bool:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                login.append((response.headers["X-Storage-Url"],
                              response.headers["X-Auth-Token"]))
                return True
        except OSError:
            return False

    if not wait_until(answered, 60, 0.5):
        raise RuntimeError("the tempauth proxy never authenticated the tenant")
    return login[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--clients", default="1,4", help="comma-separated client counts")
    args = parser.parse_args()
    client_counts = [int(n) for n in args.clients.split(",")]
    state_dir = CHECKOUT / ".iostack-bench" / f"keystone-{os.getpid()}"
    with started_stack(state_dir, "--auth", "keystone", "--keystone-venv",
                       str(default_venv(default_state_dir()))) as info:
        manager = ProcessManager(state_dir)
        try:
            port = start_tempauth_proxy(info, manager)
            targets = {"keystone": (info["tenants"]["t1"]["storage_url"],
                                    keystone_token(info["tenants"]["t1"])),
                       "tempauth": tempauth_login(port, state_dir, "t1")}
            container = f"bench-ks-{uuid.uuid4().hex[:6]}"
            for url, token in targets.values():
                Client(url, token).request("PUT", container)
            rows = []
            for size in SIZES:
                body = body_of(size)
                for op in ("PUT", "GET"):
                    for clients in client_counts:
                        rows.append(measure(args, targets, container, size, op, clients, body))
            print()
            print(f"Keystone vs tempauth, no policy (median of {args.repeat} alternating runs "
                  f"of {args.seconds:g}s; ratio = Keystone ops/s / tempauth ops/s in the same "
                  "run)")
            print_table(("size", "op", "clients", "ratio", "tempauth ops/s", "tempauth MB/s"),
                        rows)
        finally:
            manager.stop(TEMPAUTH_PROXY)


def measure(args, targets, container, size, op, clients, body):
    ratios, ops, mbs = [], [], []
    for repetition in range(args.repeat):
        results = {}
        order = list(targets) if repetition % 2 == 0 else list(reversed(targets))
        for name in order:
            url, token = targets[name]
            op_fn = put_get_ops(container, f"{name}-{size}", body)[op]
            results[name] = run_clients(clients, args.seconds, op_fn,
                                        lambda url=url, token=token: Client(url, token))
        ratios.append(results["keystone"].ops_per_s / results["tempauth"].ops_per_s)
        ops.append(results["tempauth"].ops_per_s)
        mbs.append(results["tempauth"].mb_per_s)
    row = (human_size(size), op, clients, statistics.median(ratios), statistics.median(ops),
           statistics.median(mbs))
    print(f"  {row[0]} {op} {clients}: ratio {row[3]:.2f}", flush=True)
    return row


if __name__ == "__main__":
    main()
