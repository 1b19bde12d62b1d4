"""Spark pushdown: a user-id count over a large CSV log, plain read vs storage-side selection.

The IOStack paper's experiment: Spark counts the requests of each
``user_id`` in a web-access log stored in Swift. The plain read GETs every
object whole and lets Spark pick the column; the pushdown read asks the
storage side's ``csv_select`` for the one column Spark needs (the schema
``user_id STRING``; a predicate is pushed too when ``--where`` is given). Both
go through the project's Spark data source (``spark.read.format("iostack")``,
``pushdown`` false or true), so only where the selection runs differs.

Three reads: ``plain`` (the whole objects), ``pushdown, proxy`` (the proxy
selects, ``stage=proxy``) and ``pushdown, object`` (the object servers select,
the default). The log (``bench/loggen.py``, ``--size`` bytes, 1 GiB by default, in
``--objects`` objects) is uploaded once to the all-in-one and reused by later
runs. Each configuration runs ``--repeat`` times, alternating, and medians are
reported:

- on a link limited to 1 Gbit/s by the project's own ``bandwidth`` filter
  (``FOR TENANT t1 DO SET BANDWIDTH WITH get=125MBps``; the shaping applies to
  the bytes the proxy sends, after the selection), and
- on loopback, unlimited.

Spark runs in local mode with two task slots, one shuffle partition per slot
(the group-by's default of 200 cost ~1 CPU s per job, whatever the read), and
the counts reach this driver as Arrow (``toArrow``; ``collect``'s Row objects
cost ~0.5 CPU s): fixed costs that both reads pay and that hid the difference
between them. Every read runs once, unmeasured, before the measured rounds.

Printed: bytes transferred (from the proxy's access log: what the proxy sent
to Spark), job times and their ratios, and csv_select's own speed on the data
(MB/s on one core, in-process), and the CPU seconds each part used per job
(Spark's JVM and Python workers, this driver, the proxy, the object servers:
on one machine they share the cores). Targets: bytes -95 % or more, job time on the
limited link -58 % or more. Both reads must give the same counts.

    .venv/bin/python bench/spark_pushdown.py [--size 1G] [--objects 8] [--repeat 3]

``--topology split`` reproduces the paper's set-up on two cores instead:
the storage (proxy, object, container and account servers) pinned to CPU 0
and Spark (its JVM, its Python workers and this driver) to CPU 1, with
``sched_setaffinity`` on every thread of those processes (what ``taskset
-a -p`` does; only this benchmark's own Spark processes, its descendants,
are pinned and counted, not other sessions'), the link limited to 1 Gbit/s
as above; the affinities are put back afterwards. It compares, on the
limited link, the plain CSV read, the pushdown read answered in CSV, the
pushdown read answered in Arrow (``CSV->Arrow``), the plain Parquet read (the
same log converted to Parquet, GETs of whole objects and pyarrow in the
workers) and the pushdown Parquet read (``parquet_select``), first with
shared cores, then split.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import swiftclient
from common import Policies, print_table, stack
from loggen import HEADER, chunks, parse_size

from iostack.filters.base import FilterContext
from iostack.filters.library import get_filter
from iostack.filters.records import RecordBlocks

CONTAINER = "spark-bench"
LINK = 125_000_000  # bytes/s: 1 Gbit/s
MB = 1e6


def upload_logs(conn: swiftclient.Connection, size: int, objects: int) -> list[str]:
    """The log objects, uploaded unless a previous run left the same ones."""
    tag = f"{size}-{objects}"
    conn.put_container(CONTAINER)
    _, listing = conn.get_container(CONTAINER, prefix="logs/", full_listing=True)
    names = [f"logs/part-{i:04d}.csv" for i in range(objects)]
    if [o["name"] for o in listing] == names and all(
            conn.head_object(CONTAINER, n).get("x-object-meta-loggen") == tag for n in names):
        return names
    for entry in listing:
        conn.delete_object(CONTAINER, entry["name"])
    for index, name in enumerate(names):
        body = b"".join(chunks(size // objects, seed=index + 1))
        conn.put_object(CONTAINER, name, body, headers={"X-Object-Meta-Loggen": tag})
        print(f"  uploaded {name}: {len(body) / MB:.0f} MB", file=sys.stderr)
    return names


def upload_parquet(conn: swiftclient.Connection, size: int, objects: int) -> list[str]:
    """The same logs as Parquet objects (one per CSV object), uploaded unless present."""
    tag = f"{size}-{objects}"
    names = [f"parquet/part-{i:04d}.parquet" for i in range(objects)]
    _, listing = conn.get_container(CONTAINER, prefix="parquet/", full_listing=True)
    if [o["name"] for o in listing] == names and all(
            conn.head_object(CONTAINER, n).get("x-object-meta-loggen") == tag for n in names):
        return names
    for index, name in enumerate(names):
        body = b"".join(chunks(size // objects, seed=index + 1))
        table = pa_csv.read_csv(io.BytesIO(body), convert_options=pa_csv.ConvertOptions(
            column_types={"user_id": pa.string()}))
        out = io.BytesIO()
        pq.write_table(table, out)
        conn.put_object(CONTAINER, name, out.getvalue(), headers={"X-Object-Meta-Loggen": tag})
        print(f"  uploaded {name}: {out.tell() / MB:.0f} MB", file=sys.stderr)
    return names


def bytes_sent(log: Path, offset: int, agent: str) -> int:
    """Bytes the proxy sent to requests with User-Agent ``agent``, logged after ``offset``."""
    total = 0
    with open(log, "rb") as f:
        f.seek(offset)
        for line in f:
            fields = line.split()
            if len(fields) > 12 and fields[0] == b"proxy-server:" and fields[9] == agent.encode():
                total += int(fields[12]) if fields[12].isdigit() else 0
    return total


def filter_speed(sample: bytes, params: dict[str, Any]) -> float:
    """csv_select's MB/s on one core over ``sample``, the median of 3 in-process passes."""
    body = sample[len(HEADER):]
    pieces = [body[i:i + 65536] for i in range(0, len(body), 65536)]
    speeds = []
    for _ in range(3):
        selection = get_filter("csv_select").selection(params, FilterContext("AUTH_t1"))
        began_cpu = time.process_time()
        selection.begin(HEADER, True)
        for block in RecordBlocks().blocks(pieces):
            selection.select(block)
        speeds.append(len(sample) / MB / max(time.process_time() - began_cpu, 1e-9))
    return statistics.median(speeds)


SPARK_CORES = 2  # local[N]: Spark's task slots


def spark_session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from iostack.spark import register

    # One shuffle partition per task slot: Spark's default of 200 made the group-by's
    # shuffle (8 map tasks x 200 files, 200 reduce tasks before AQE coalesces them)
    # cost ~1 CPU s of every job, whatever the read.
    spark = (SparkSession.builder.master(f"local[{SPARK_CORES}]")
             .appName("iostack-pushdown-bench")
             .config("spark.sql.shuffle.partitions", str(SPARK_CORES))
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


MODES = {"plain": {"pushdown": "false"},  # data source options of each read
         "pushdown, proxy": {"pushdown": "true", "stage": "proxy"},
         "pushdown, object": {"pushdown": "true", "stage": "object"}}


# The split topology's reads (data source options), all on the limited link.
FORMAT_MODES = {
    "plain CSV": {"pushdown": "false"},
    "pushdown CSV": {"pushdown": "true", "answer": "csv"},
    "pushdown CSV->Arrow": {"pushdown": "true"},
    "plain Parquet": {"pushdown": "false", "format": "parquet", "prefix": "parquet/"},
    "pushdown Parquet": {"pushdown": "true", "format": "parquet", "prefix": "parquet/"},
}
BASELINES = {"pushdown CSV": "plain CSV", "pushdown CSV->Arrow": "plain CSV",
             "pushdown Parquet": "plain Parquet"}

PARTS = ("Spark JVM", "Spark Python workers", "driver", "proxy", "object servers")
STORAGE_SERVERS = ("proxy-server", "object-server", "container-server", "account-server")
SPARK_MARKERS = ("org.apache.spark", "pyspark.daemon")


def own_processes() -> set[str]:
    """The PIDs of this process and its descendants (Spark's JVM, its Python workers):
    other sessions' Spark processes on a shared machine are neither pinned nor counted."""
    children: dict[str, list[str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue  # gone meanwhile
        children.setdefault(parent, []).append(pid)
    own, todo = set(), [str(os.getpid())]
    while todo:
        pid = todo.pop()
        own.add(pid)
        todo += children.get(pid, [])
    return own


def pin(markers: tuple[str, ...], cpus: set[int], among: set[str] | None = None) -> int:
    """Set the CPU affinity of every thread of the processes whose command line holds
    one of ``markers``; with ``among`` (PIDs), only of those, and of this process too.
    The number of processes."""
    pinned = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if among is not None and pid not in among:
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if not (any(m in args for m in markers) or (among and int(pid) == os.getpid())):
                continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), cpus)
        except OSError:
            continue  # gone meanwhile
        pinned += 1
    return pinned


def set_topology(swift_dir: str, split: bool) -> None:
    """Storage on CPU 0 and Spark on CPU 1 (``split``), or every process on every CPU."""
    every = set(range(os.cpu_count() or 1))
    storage = pin(tuple(f"{swift_dir}/{server}" for server in STORAGE_SERVERS),
                  {0} if split else every)
    spark = pin(SPARK_MARKERS, {1} if split else every, among=own_processes())
    print(f"  {'split' if split else 'shared'} cores: {storage} storage processes, "
          f"{spark} Spark processes", file=sys.stderr)


def cpu_seconds(swift_dir: str) -> dict[str, float]:
    """CPU seconds used so far by each part of the job and the stack (``PARTS``).

    Processes that exit (Python workers forked by PySpark's daemon) count in
    their parent's children times; the driver counts itself only.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    used = dict.fromkeys(PARTS, 0.0)
    own = own_processes()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile
        user, system, children_user, children_system = map(int, stat[11:15])
        if int(pid) == os.getpid():
            part, seconds = "driver", user + system
        else:
            seconds = user + system + children_user + children_system
            markers = (("Spark JVM", "org.apache.spark"),
                       ("Spark Python workers", "pyspark.daemon"),
                       ("proxy", f"{swift_dir}/proxy-server"),
                       ("object servers", f"{swift_dir}/object-server"))
            part = next((name for name, marker in markers if marker in args), None)
            if part in ("Spark JVM", "Spark Python workers") and pid not in own:
                part = None  # another session's Spark
        if part:
            used[part] += seconds / ticks
    return used


def count_users(spark, info: dict[str, Any], options: dict[str, str], agent: str,
                where: str | None) -> tuple[float, dict[str, int]]:
    creds = info["tenants"]["t1"]
    frame = (spark.read.format("iostack")
             .option("auth_url", info["auth_url"]).option("user", creds["user"])
             .option("key", creds["key"]).option("container", CONTAINER)
             .option("prefix", "logs/").options(**options)
             .option("user_agent", agent)
             .schema("user_id STRING, status INT" if where else "user_id STRING").load())
    if where:
        frame = frame.where(where)
    began = time.monotonic()
    # The ~200 k counts reach this driver as Arrow: collect()'s Row objects cost ~0.5 CPU s.
    table = frame.groupBy("user_id").count().toArrow()
    seconds = time.monotonic() - began
    return seconds, dict(zip(table.column("user_id").to_pylist(),
                             table.column("count").to_pylist(), strict=True))


def warm_up(spark, info: dict[str, Any], modes: dict[str, dict[str, str]],
            where: str | None) -> None:
    """Each read once, unmeasured: the JVM's JIT, Spark's generated code and the
    Python workers are then as warm for one read as for the others."""
    for options in modes.values():
        count_users(spark, info, options, "warm-up", where)


def run(spark, info: dict[str, Any], log: Path, repeat: int, where: str | None,
        modes: dict[str, dict[str, str]] = MODES) -> dict[str, dict[str, float]]:
    """Median seconds and bytes of each read (``modes``), alternating."""
    samples: dict[str, dict[str, list[float]]] = {
        mode: {"seconds": [], "bytes": [], **{part: [] for part in PARTS}} for mode in modes}
    reference = None
    for _ in range(repeat):
        for mode, options in modes.items():
            agent = f"iostack-bench-{uuid.uuid4().hex[:8]}"
            offset = log.stat().st_size
            before = cpu_seconds(info["swift_dir"])
            seconds, counts = count_users(spark, info, options, agent, where)
            time.sleep(1.5)  # the proxy's access log is written after each response
            after = cpu_seconds(info["swift_dir"])
            for part in PARTS:
                samples[mode][part].append(after[part] - before[part])
            samples[mode]["seconds"].append(seconds)
            samples[mode]["bytes"].append(bytes_sent(log, offset, agent))
            if reference is None:
                reference = counts
            elif counts != reference:
                raise SystemExit(f"{mode} read counted differently from the plain read")
            print(f"  {mode}: {seconds:.1f} s, {samples[mode]['bytes'][-1] / MB:.1f} MB",
                  file=sys.stderr)
    return {mode: {k: statistics.median(v) for k, v in values.items()}
            for mode, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=parse_size, default=1 << 30, help="log size (1G)")
    parser.add_argument("--objects", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--where", help="a Spark filter to push too, e.g. 'status >= 500'")
    parser.add_argument("--topology", choices=("shared", "split"), default="shared",
                        help="split: storage on CPU 0, Spark on CPU 1 (and shared, to compare)")
    args = parser.parse_args()
    if args.topology == "split":
        return split_topology(args)
    with stack() as info:
        conn = swiftclient.Connection(authurl=info["auth_url"], user=info["tenants"]["t1"]["user"],
                                      key=info["tenants"]["t1"]["key"], retries=2)
        print(f"uploading/checking {args.size / MB:.0f} MB of logs ...", file=sys.stderr)
        names = upload_logs(conn, args.size, args.objects)
        sample = b"".join(chunks(min(64 << 20, args.size), seed=1))
        speed = filter_speed(sample, {"columns": "user_id"})
        log = Path(info["log_dir"]) / "proxy.log"
        spark = spark_session()
        policies = Policies(info)
        results = {}
        try:
            warm_up(spark, info, MODES, args.where)
            print("loopback:", file=sys.stderr)
            results["loopback"] = run(spark, info, log, args.repeat, args.where)
            policies.add(f"FOR TENANT t1 DO SET BANDWIDTH WITH get={LINK // 1_000_000}MBps")
            conn.get_object(CONTAINER, names[0])  # traffic, so the controller assigns rates
            print("1 Gbit/s link:", file=sys.stderr)
            results["1 Gbit/s"] = run(spark, info, log, args.repeat, args.where)
        finally:
            policies.remove_all()
            spark.stop()
    rows = []
    for link, result in results.items():
        plain = result["plain"]
        for mode, read in result.items():
            rows.append([link, mode, f"{read['bytes'] / MB:.1f}",
                         f"{100 * (1 - read['bytes'] / plain['bytes']):.1f} %",
                         f"{read['seconds']:.1f}", f"{read['seconds'] / plain['seconds']:.2f}",
                         f"{100 * (1 - read['seconds'] / plain['seconds']):.0f} %"])
    query = f"user_id count{' where ' + args.where if args.where else ''}"
    print(f"Spark {query} over {args.size / MB:.0f} MB of CSV logs in {args.objects} objects "
          f"(median of {args.repeat} alternating runs)")
    print_table(["link", "read", "MB sent", "bytes saved", "job s", "time ratio",
                 "time saved"], rows)
    print("CPU seconds per job (median), the stack's and Spark's processes on this machine")
    print_table(["link", "read", *PARTS, "total"], [
        [link, mode, *(f"{read[part]:.2f}" for part in PARTS),
         f"{sum(read[part] for part in PARTS):.2f}"]
        for link, result in results.items() for mode, read in result.items()])
    print(f"csv_select columns=user_id on this data: {speed:.0f} MB/s on one core (in-process)")
    return 0


def split_topology(args: argparse.Namespace) -> int:
    """The formats compared on a 1 Gbit/s link, cores shared and then split."""
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("--topology split needs two CPUs")
    with stack() as info:
        conn = swiftclient.Connection(authurl=info["auth_url"], user=info["tenants"]["t1"]["user"],
                                      key=info["tenants"]["t1"]["key"], retries=2)
        print(f"uploading/checking {args.size / MB:.0f} MB of logs ...", file=sys.stderr)
        names = upload_logs(conn, args.size, args.objects)
        upload_parquet(conn, args.size, args.objects)
        log = Path(info["log_dir"]) / "proxy.log"
        spark = spark_session()
        policies = Policies(info)
        results = {}
        try:
            policies.add(f"FOR TENANT t1 DO SET BANDWIDTH WITH get={LINK // 1_000_000}MBps")
            conn.get_object(CONTAINER, names[0])  # traffic, so the controller assigns rates
            warm_up(spark, info, FORMAT_MODES, args.where)
            for topology in ("shared", "split"):
                set_topology(info["swift_dir"], topology == "split")
                results[topology] = run(spark, info, log, args.repeat, args.where, FORMAT_MODES)
        finally:
            set_topology(info["swift_dir"], False)
            policies.remove_all()
            spark.stop()
    rows = []
    for topology, result in results.items():
        for mode, read in result.items():
            base = result[BASELINES.get(mode, mode)]
            rows.append([topology, mode, f"{read['bytes'] / MB:.1f}",
                         f"{100 * (1 - read['bytes'] / base['bytes']):.1f} %",
                         f"{read['seconds']:.1f}",
                         f"{100 * (1 - read['seconds'] / base['seconds']):.0f} %"])
    query = f"user_id count{' where ' + args.where if args.where else ''}"
    print(f"Spark {query} over {args.size / MB:.0f} MB of logs in {args.objects} objects, "
          f"1 Gbit/s link (median of {args.repeat} alternating runs; savings against the "
          f"plain read of the same format)")
    print_table(["cores", "read", "MB sent", "bytes saved", "job s", "time saved"], rows)
    print("CPU seconds per job (median)")
    print_table(["cores", "read", *PARTS], [
        [topology, mode, *(f"{read[part]:.2f}" for part in PARTS)]
        for topology, result in results.items() for mode, read in result.items()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
