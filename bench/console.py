"""The admin console's cost: server time of its heavy pages, and controller CPU per live page.

1. Server time (the console's Flask app in this process, on the stack's real
   Redis under a private key prefix): the policies page with 1,000 policies
   (100 tenants, one in ten dynamic, so the actor column is filled), and the
   metrics pages with 100 tenants x 2 containers and 300 closed intervals in
   the aggregator: the page, its table fragment, the first chart load and the
   steady-state poll. Median of ``--repeat`` requests each (target: < 1 s).
2. CPU per open live page (the stack's real controller process): the
   controller's CPU seconds over ``--seconds`` with no console page open, then
   with ``--pages`` live metrics pages open in Debian's Chromium (each polls
   every metric interval), while one tenant PUTs at 4/s so intervals carry
   data; the difference per page and second, as a share of one core
   (target: < 2 %).

    .venv/bin/python bench/console.py [--repeat 5] [--pages 4] [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import threading
import time
import types
import uuid
from pathlib import Path

from common import Client, auth, group_cpu_seconds, print_table, stack

from iostack.aio.processes import ProcessManager
from iostack.controller.app import create_app
from iostack.monitoring.aggregator import Aggregator
from iostack.policy.connection import connect

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
TENANTS = 100
POLICIES = 1000


def timed(client, path: str, repeat: int) -> tuple[float, float, int, int]:
    """(median wall ms, median CPU ms, status, bytes) of ``repeat`` GETs through the app.

    The test client runs the whole request (routing, Redis reads, rendering)
    in this thread; CPU time is what it costs whatever the machine's load.
    """
    times, cpu, status, size = [], [], 0, 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.thread_time()
        response = client.get(path)
        data = response.get_data()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        status, size = response.status_code, len(data)
    return statistics.median(times), statistics.median(cpu), status, size


def server_time(info: dict, repeat: int) -> list[list]:
    prefix = f"iostack-bench-console-{uuid.uuid4().hex[:8]}:"
    token = "bench-console-admin-token-0123456789"  # noqa: S105 - a throw-away in-process app's
    app = create_app({"host": "127.0.0.1", "port": 0, "redis_url": info["redis_url"],
                      "amqp_url": "amqp://unused", "admin_token": token,
                      "state_dir": str(Path(info["state_dir"])), "key_prefix": prefix})
    ctl = app.extensions["iostack"]
    try:
        ctl.registries.seed()
        tenants = [f"t{n:03d}" for n in range(TENANTS)]
        for tenant in tenants:
            ctl.registries.add_tenant(tenant)
        lines = []
        for n in range(POLICIES):
            tenant = tenants[n % TENANTS]
            when = " WHEN PUTS_SEC > 5" if n % 10 == 0 else ""
            lines.append(f"FOR CONTAINER {tenant}/c{n // TENANTS}{when} "
                         f"DO SET compression WITH level={1 + n % 9}")
        for first in range(0, POLICIES, 100):
            ctl.store.submit("\n".join(lines[first:first + 100]), who="bench")
        aggregator = Aggregator(history=300)
        start = time.time() - 400
        for i in range(300):
            aggregator.add("metrics.proxy", {
                "stage": "proxy", "source": "proxy-1", "start": start + i, "interval": 1.0,
                "samples": [{"account": f"AUTH_{t}", "container": f"c{k}",
                             "ops": {"PUT": 3 + k, "GET": 7}, "bytes_in": 1 << 20,
                             "bytes_out": 2 << 20, "active": 1,
                             "latency": {"PUT": {"count": 3, "sum": 0.03,
                                                 "buckets": {"5": 3}}}}
                            for t in tenants for k in range(2)]})
        aggregator.tick()
        ctl.control_loop = types.SimpleNamespace(aggregator=aggregator)
        client = app.test_client()
        client.post("/ui/login", data={"token": token})
        last = aggregator.latest().start
        rows = []
        for label, path in [
            (f"policies page, {POLICIES} policies", "/ui/policies"),
            (f"metrics page, {TENANTS} tenants", "/ui/metrics"),
            ("metrics table fragment", "/ui/metrics/table"),
            ("chart data, first load (60 intervals)", "/ui/metrics/data?target=*"),
            ("chart data, one poll", f"/ui/metrics/data?target=*&since={last - 1}"),
            ("history page (last 200 changes)", "/ui/history"),
        ]:
            ms, cpu, status, size = timed(client, path, repeat)
            rows.append([label, f"{ms:.0f} ms", f"{cpu:.0f} ms", status,
                         f"{size / 1024:.0f} KiB"])
        return rows
    finally:
        client_ = connect(info["redis_url"])
        for key in client_.scan_iter(prefix + "*"):
            client_.delete(key)


def live_cpu(info: dict, pages: int, seconds: float) -> list[list]:
    from playwright.sync_api import sync_playwright

    controller = ProcessManager(Path(info["state_dir"])).find("controller")
    if controller is None:
        raise SystemExit("the stack's controller is not running")
    pgid = os.getpgid(controller.pid)
    storage_url, token = auth(info, "t1")
    stop = threading.Event()

    def load() -> None:
        client = Client(storage_url, token)
        client.request("PUT", "bench-console")
        n = 0
        while not stop.is_set():
            client.request("PUT", f"bench-console/o{n % 50}", b"x" * 4096)
            n += 1
            stop.wait(0.25)

    def cpu_over(window: float) -> float:
        before = group_cpu_seconds({pgid})
        time.sleep(window)
        return group_cpu_seconds({pgid}) - before

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        time.sleep(3)
        idle = cpu_over(seconds)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(base_url=info["controller_url"])
            page = context.new_page()
            page.goto("/ui/login")
            page.get_by_label("Token", exact=True).fill(info["admin_token"])
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(re.compile(r"/ui/policies"))
            opened = [page]
            for _ in range(pages):
                tab = context.new_page()
                tab.goto(f"/ui/metrics?target={info['tenants']['t1']['account']}")
                opened.append(tab)
            time.sleep(3)
            live = cpu_over(seconds)
            polls = opened[-1].evaluate("performance.getEntriesByType('resource')"
                                        ".filter(e => e.name.includes('/metrics/')).length")
            browser.close()
    finally:
        stop.set()
        loader.join()
    per_page = (live - idle) / pages / seconds
    return [["controller, no page open", f"{idle / seconds * 100:.2f} % of a core"],
            [f"controller, {pages} live pages open", f"{live / seconds * 100:.2f} % of a core"],
            ["per open live page", f"{per_page * 100:.2f} % of a core"],
            ["requests by one page (incl. table refresh)", str(polls)]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with stack() as info:
        print(f"Server time (median of {args.repeat}; target < 1 s; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
        print_table(["PAGE", "SERVER TIME", "CPU", "STATUS", "SIZE"],
                    server_time(info, args.repeat))
        print(f"\nController CPU over {args.seconds:g} s (target < 2 % of a core per page):")
        print_table(["WHAT", "CPU"], live_cpu(info, args.pages, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
