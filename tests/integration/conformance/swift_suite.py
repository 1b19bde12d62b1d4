"""Swift's own functional tests through IOStack, compared with plain Swift in the same run.

IOStack sits inside Swift's proxy pipeline, so the fairest judge of whether it
keeps Swift's API is Swift's own functional suite (``test/functional``,
including its s3api suite, and ``test/s3api``). This runner

1. fetches those tests from the source distribution of the *installed* Swift
   version (``pip download --no-binary :all: swift==<version>``), unpacked once
   under ``build/swift-tests/swift-<version>/`` and reused, with the suite's
   own extra dependency (boto 2) in ``deps/`` beside it;
2. starts a private all-in-one (free ports, its own Redis and RabbitMQ, devices
   on XFS loopback images where the host allows: root and ``xfsprogs``) and,
   over its account, container and object servers, two extra proxies:
   the all-in-one's own proxy config (every IOStack middleware), and the same
   config with the IOStack and Storlets middlewares taken out of the pipeline
   (plain Swift). Both add Swift's functional-test users to tempauth, with
   keys generated for this run;
3. runs the suite against IOStack in each configuration at once: no policy,
   ``SET COMPRESSION`` and ``SET ENCRYPTION``, each on two test accounts of its
   own (``AUTH_<configuration>`` and ``AUTH_<configuration>2``; the policy is
   checked on a stored probe object before the run). The suite keeps its state
   in its accounts (account tests delete every container in theirs), so
   separate accounts let the runs share one stack without seeing each other;
4. runs the tests that failed through IOStack again against plain Swift (on
   accounts ``AUTH_plain`` and ``AUTH_plain2``; ``--baseline all`` runs the
   whole selection there), and prints pass/fail/skip counts per configuration
   and the tests that fail through IOStack but pass on plain Swift: only those
   count against IOStack (exit status 1). Tests failing on plain Swift too are
   listed as such.

Tests are skipped only where the generated ``test.conf`` says why (its
comments): no third-party auth (Keystone), one reseller prefix (service
tokens), no s3_acl in the proxy's s3api. On devices that are not XFS,
``NEEDS_LARGE_XATTRS`` are deselected, and the run says so.

    .venv/bin/python tests/integration/conformance/swift_suite.py            # the full suite
    .venv/bin/python tests/integration/conformance/swift_suite.py --quick    # QUICK_SELECTION
    ... --configs compression --keep   # one configuration; keep build/swift-tests/run/

``make conformance`` and ``make test`` (through ``test_swift_suite.py``) run the
full suites.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET  # noqa: S405 - parses the report our own pytest run wrote
from collections.abc import Iterator
from configparser import ConfigParser
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import swiftclient
from swift.common import direct_client, utils
from swift.common.ring import Ring

from iostack.aio.processes import ProcessManager
from iostack.aio.session import started_stack
from iostack.aio.swift import launcher_command
from iostack.controller.client import ControllerClient
from iostack.ports import free_port, wait_until
from iostack.private_files import write_private_text
from iostack.stored_object import PIPELINE_HEADER

CHECKOUT = Path(__file__).resolve().parents[3]
BUILD = CHECKOUT / "build" / "swift-tests"
SUITES = ["test/functional", "test/s3api"]
# The suite's own dependencies (its test-requirements.txt) that IOStack's venv lacks:
# test/functional/s3api drives S3 with boto 2. Installed beside the suite, on its
# PYTHONPATH only.
SUITE_DEPS = ["boto==2.49.0",
              # botocore signs S3 requests with CRC32C/CRC64NVME checksums and lower-case
              # methods only with the AWS CRT; without it the suite skips those tests.
              "awscrt==0.29.2"]
SUITE_DEPS_STAMP = "installed.txt"
# A bounded selection for ``make test``: objects' framing, size and metadata limits, ETag,
# Range, conditional requests and copies; versioned writes with their ACL checks;
# S3's framing errors and objects. (test_access_control.py needs Keystone v3 users.)
QUICK_SELECTION = [
    "test/functional/tests.py::TestFile",
    "test/functional/tests.py::TestFileComparison",
    "test/functional/test_versioned_writes.py::TestObjectVersioning",
    *(f"test/s3api/test_input_errors.py::{cls}::{test}"
      for cls in ("TestV2AuthHeaders", "TestV4AuthHeaders")
      for test in ("test_no_md5_no_sha_no_content_length",
                   "test_no_md5_good_sha_no_content_length",
                   "test_no_md5_good_sha_chunk_encoding_declared_ok")),
    "test/s3api/test_object.py",
]
# Object tests that store Swift's whole metadata allowance (max_meta_count,
# max_meta_overall_size) on one object: more xattrs than ext4 holds per inode. There the
# object server answers 507, which error-limits the only device for 60 s and fails the
# tests after them; Swift's SAIO puts its devices on XFS for this. Deselected (and said
# so) when the stack's devices are not on XFS.
NEEDS_LARGE_XATTRS = [f"test/functional/tests.py::{cls}::{test}"
                      for cls in ("TestFile", "TestFileUTF8")
                      for test in ("testMetadataNumberLimit", "testMetadataOnPost")]
CONFIGS = {  # configuration -> the filter set on both test tenants (None: no policy)
    "none": None,
    "compression": "COMPRESSION",
    "encryption": "ENCRYPTION",
}
# Swift's own middlewares that its suites test and the all-in-one does not run, added to
# both proxies: (after which middleware, its config). domain_remap serves
# <container>.<account>.STORAGE_DOMAIN host names (test.conf's storage_domain).
STORAGE_DOMAIN = "swift.example.com"
SWIFT_EXTRAS = {
    "etag-quoter": ("cache", {"use": "egg:swift#etag_quoter"}),
    "domain_remap": ("cache", {"use": "egg:swift#domain_remap",
                               "storage_domain": STORAGE_DOMAIN}),
    "staticweb": ("tempauth", {"use": "egg:swift#staticweb"}),
}
# Middlewares a plain Swift proxy does not have.
NOT_SWIFT = {"iostack_metrics", "iostack_qos", "iostack_select", "storlet_handler", "iostack",
             "iostack_cache"}
PLAIN = "plain"  # the baseline's accounts are AUTH_plain and AUTH_plain2


@dataclass(frozen=True)
class Accounts:
    """One configuration's test accounts: the suite's ``account`` and ``account2``, and
    ``account6``, its reseller admin's."""

    first: str
    second: str
    reseller: str

    @classmethod
    def of(cls, config: str) -> Accounts:
        return cls(config, f"{config}2", f"{config}admin")

    def users(self) -> list[tuple[str, str, str]]:
        """tempauth users of Swift's functional tests (test/sample.conf): account, user,
        groups. ``tester3`` is the first account's user without admin rights."""
        return [(self.first, "tester", ".admin"), (self.first, "tester2", ".admin"),
                (self.first, "tester3", ""), (self.second, "tester2", ".admin"),
                (self.reseller, "admin", ".reseller_admin")]

    def admin(self, account: str) -> str:
        """The ``account:user`` that owns ``account``."""
        return f"{account}:tester" if account == self.first else f"{account}:tester2"


def swift_version() -> str:
    return importlib.metadata.version("swift")


def fetch_suite(root: Path = BUILD) -> Path:
    """The installed Swift version's ``test/`` tree, from its sdist on first use, with
    the suite's own dependencies that IOStack does not have in ``deps/`` beside it."""
    version = swift_version()
    target = root / f"swift-{version}"
    stamp = target / "deps" / SUITE_DEPS_STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8").split() == SUITE_DEPS:
        return target
    if not (target / "test" / "functional").is_dir():
        _unpack_sdist(root, version, target)
    deps = target / "deps"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",  # noqa: S603
                    "--upgrade", "--target", str(deps), *SUITE_DEPS], check=True)
    (deps / SUITE_DEPS_STAMP).write_text("\n".join(SUITE_DEPS) + "\n", encoding="utf-8")
    return target


def _unpack_sdist(root: Path, version: str, target: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",  # noqa: S603
                        "--no-binary", ":all:", f"swift=={version}",
                        "-d", tmp], check=True)
        (sdist,) = Path(tmp).glob("swift-*.tar.gz")
        prefix = f"swift-{version}/test/"
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, members=[m for m in tar.getmembers()  # noqa: S202 - data filter
                                         if m.name.startswith(prefix)], filter="data")
        os.replace(Path(tmp) / f"swift-{version}", target)


@dataclass
class Outcomes:
    """One run's result per test id: ``passed``, ``failed`` or ``skipped`` (+ a message)."""

    name: str
    results: dict[str, tuple[str, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for o, _ in self.results.values() if o == outcome)

    def failed(self) -> set[str]:
        return {t for t, (o, _) in self.results.items() if o == "failed"}


def node_id(suite: Path, classname: str, name: str) -> str:
    """pytest's id of a test from its JUnit ``classname`` (``test.functional.tests.TestFile``)
    and ``name``: the longest dotted prefix that is a module of the suite is its file."""
    parts = classname.split(".")
    for split in range(len(parts), 0, -1):
        module = "/".join(parts[:split]) + ".py"
        if (suite / module).is_file():
            return "::".join([module, *parts[split:], name])
    return f"{classname}::{name}"


def read_junit(path: Path, name: str, suite: Path) -> Outcomes:
    """One run's outcomes by pytest id, from the JUnit report it wrote."""
    outcomes = Outcomes(name)
    for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314 - our own report
        test = node_id(suite, case.get("classname") or "", case.get("name") or "")
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "")[:300]
            elif child.tag == "skipped":
                outcome, message = "skipped", (child.get("message") or "")[:300]
        outcomes.results[test] = outcome, message
    return outcomes


class Proxy:
    """A proxy over the stack's servers: its config with the test users, maybe without IOStack."""

    def __init__(self, info: dict[str, Any], workdir: Path, name: str, keys: dict[str, str],
                 users: list[tuple[str, str, str]], plain: bool, workers: int = 1) -> None:
        self.swift_dir = Path(info["swift_dir"])
        self.conf = ConfigParser(interpolation=None)
        self.conf.read(self.swift_dir / "proxy-server.conf")
        self.conf["DEFAULT"]["workers"] = str(workers)
        pipeline = self.conf["pipeline:main"]["pipeline"].split()
        if plain:
            pipeline = [p for p in pipeline if p not in NOT_SWIFT]
        for middleware, (after, conf) in SWIFT_EXTRAS.items():
            pipeline.insert(pipeline.index(after) + 1, middleware)
            self.conf[f"filter:{middleware}"] = conf
        self.conf["pipeline:main"]["pipeline"] = " ".join(pipeline)
        # X-Open-Expired: reading an object past its X-Delete-At (the suites test both).
        self.conf["app:proxy-server"]["allow_open_expired"] = "true"
        for account, user, groups in users:
            self.conf["filter:tempauth"][f"user_{account}_{user}"] = \
                f"{keys[f'{account}:{user}']} {groups}".strip()
        self.conf_path = workdir / f"{name}-proxy-server.conf"
        self.log = workdir / f"{name}-proxy.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> None:
        """Start on a free port; again on another if a client's connection took that one
        before the proxy bound it (free ports and outgoing connections share a range)."""
        for _ in range(attempts):
            self.port = free_port()
            self.conf["DEFAULT"]["bind_port"] = str(self.port)
            text = io.StringIO()
            self.conf.write(text)
            write_private_text(self.conf_path, text.getvalue())  # the users' keys
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(  # noqa: S603 - our launcher, our config
                    launcher_command(self.swift_dir, self.conf_path, "proxy-server"),
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            if wait_until(self._answers_or_exited, 90, 0.2) and self.proc.poll() is None:
                return
            self.stop()
        raise RuntimeError(f"proxy did not start; see {self.log}")

    def _answers_or_exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None or self._healthy()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthcheck", timeout=2):  # noqa: S310
                return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and its workers
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def test_conf(url: str, keys: dict[str, str], accounts: Accounts) -> str:
    """Swift's ``test.conf`` for the proxy at ``url`` and these accounts; comments say what
    is skipped."""
    first, second = accounts.first, accounts.second
    # S3 users: two owners of the first account and an unprivileged one, as
    # test/sample.conf has them.
    s3_users = [f"{first}:tester", f"{first}:tester2", f"{first}:tester3"]
    func_s3 = "\n".join(f"s3_access_key{n} = {user}\ns3_secret_key{n} = {keys[user]}"
                        for n, user in zip(["", "2", "3"], s3_users, strict=True))
    s3api = "\n".join(f"access_key{n} = {user}\nsecret_key{n} = {keys[user]}"
                      for n, user in enumerate(s3_users, 1))
    return f"""\
# Generated by tests/integration/conformance/swift_suite.py for one run.
# Skipped on purpose, and why:
# - account4/username4 (Keystone v3 domains: "AUTH VERSION 3 SPECIFIC TEST",
#   test_access_control.py): the proxy authenticates with tempauth (iostack aio
#   start --auth keystone is a separate configuration).
# - account5/username5 and service_prefix (service tokens): tempauth has one
#   reseller prefix, AUTH_.
# - s3_acl_tests_enabled = False: the proxy's s3api runs without s3_acl, as
#   Swift's own default.
# Skipped by the suites themselves, for what the all-in-one is:
# - "Cross policy test requires multiple policies", "Multiple policies not
#   enabled": the all-in-one has one storage policy.
# - "allow_open_expired is enabled": the proxies enable X-Open-Expired, so the
#   tests of reading expired objects run, not the one of it being refused.
# - testPUTError: the proxy allows account management.
# - "x-amz-server-side-encryption is not supported": Swift's keymaster is not
#   in the pipeline (IOStack's ENCRYPTION policy is the at-rest encryption).
# - "in-process functests required": request timeouts need the suite's
#   in-process servers. "Absolute URL test requires https": plain HTTP.
[func_test]
auth_uri = {url}/auth/v1.0
s3_storage_url = {url}/
s3_region = us-east-1
account = {first}
username = tester
password = {keys[f'{first}:tester']}
{func_s3}
account2 = {second}
username2 = tester2
password2 = {keys[f'{second}:tester2']}
username3 = tester3
password3 = {keys[f'{first}:tester3']}
account6 = {accounts.reseller}
username6 = admin
password6 = {keys[f'{accounts.reseller}:admin']}
collate = C
storage_domain = {STORAGE_DOMAIN}

[s3api_test]
endpoint = {url}
region = us-east-1
{s3api}
s3_acl_tests_enabled = False
"""


@contextmanager
def swift_dir(path: str) -> Iterator[None]:
    """Swift's hash path settings from ``path`` for the block, the caller's restored after
    it: a test session locates its own stack's objects with those."""
    saved = utils.SWIFT_CONF_FILE, utils.HASH_PATH_PREFIX, utils.HASH_PATH_SUFFIX
    utils.set_swift_dir(path)
    try:
        yield
    finally:
        utils.SWIFT_CONF_FILE, utils.HASH_PATH_PREFIX, utils.HASH_PATH_SUFFIX = saved


def device_args() -> list[str]:
    """Devices on XFS where the host allows it (root, xfsprogs), as Swift's SAIO has them."""
    if os.geteuid() == 0 and shutil.which("mkfs.xfs"):
        return ["--device-fs", "xfs"]
    return []


def device_filesystem(devices: Path) -> str:
    """The type of the filesystem holding the first device (``xfs``, ``ext2/ext3``...)."""
    first = sorted(devices.iterdir())[0]
    return subprocess.run(["stat", "-f", "-c", "%T", str(first)],  # noqa: S603, S607
                          capture_output=True, text=True, check=True).stdout.strip()


class SuiteProcess:
    """One pytest run of the suite, started; ``wait`` gives its outcomes."""

    def __init__(self, name: str, suite: Path, workdir: Path, conf: Path,
                 tests: list[str]) -> None:
        self.name = name
        self.suite = suite
        self.report = workdir / f"{name}.xml"
        env = {**os.environ, "SWIFT_TEST_CONFIG_FILE": str(conf), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": str(suite / "deps")}
        self.started = time.monotonic()
        with open(workdir / f"{name}.log", "wb") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - pytest on the fetched suite
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                 "-q", "--rootdir", str(suite), f"--junitxml={self.report}", *tests],
                cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> Outcomes:
        self.proc.wait()
        outcomes = read_junit(self.report, self.name, self.suite)
        outcomes.seconds = time.monotonic() - self.started
        print(f"{self.name}: {outcomes.count('passed')} passed, {outcomes.count('failed')} "
              f"failed, {outcomes.count('skipped')} skipped in {outcomes.seconds:.0f} s",
              flush=True)
        return outcomes

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Run:
    """One stack, its two proxies, and suite runs against either, each on its own accounts."""

    def __init__(self, info: dict[str, Any], suite: Path, workdir: Path,
                 configs: list[str]) -> None:
        self.info = info
        self.suite = suite
        self.workdir = workdir
        users = [u for c in [*configs, PLAIN] for u in Accounts.of(c).users()]
        self.keys = {f"{a}:{u}": secrets.token_urlsafe(18) for a, u, _ in users}
        self.plain = Proxy(info, workdir, "plain", self.keys, users, plain=True)
        # A worker per configuration: the runs go on at once, and one worker's requests
        # queue behind each other on a loaded machine until the backend timeouts fire.
        self.iostack = Proxy(info, workdir, "iostack", self.keys, users, plain=False,
                             workers=len(configs))
        self.admin = ControllerClient(info["controller_url"], info["admin_token"])
        with swift_dir(info["swift_dir"]):
            self.ring = Ring(info["swift_dir"], ring_name="object")
        self.deselected: list[str] = []
        devices_fs = device_filesystem(Path(info["state_dir"]) / "srv" / "node")
        if devices_fs != "xfs":
            self.deselected = NEEDS_LARGE_XATTRS
            print(f"devices on {devices_fs}, not xfs: deselected {' '.join(self.deselected)}",
                  flush=True)

    def start_suite(self, proxy: Proxy, name: str, accounts: Accounts,
                    selection: list[str]) -> SuiteProcess:
        conf = self.workdir / f"{name}-test.conf"
        write_private_text(conf, test_conf(proxy.url, self.keys, accounts))
        return SuiteProcess(name, self.suite, self.workdir, conf,
                            [*selection, *(f"--deselect={t}" for t in self.deselected)])

    @contextmanager
    def policy(self, filter_name: str | None, accounts: Accounts) -> Iterator[None]:
        """``SET <filter>`` on both accounts for the block, checked on a stored object."""
        if filter_name is None:
            yield
            return
        tenants = (accounts.first, accounts.second)
        added = self.admin.add_policies(
            "\n".join(f"FOR TENANT {t} DO SET {filter_name}" for t in tenants))
        try:
            for tenant in tenants:
                self._check_enforced(accounts.admin(tenant), filter_name.lower())
            yield
        finally:
            for record in added["policies"]:
                self.admin.delete_policy(record["id"])

    def _check_enforced(self, user: str, filter_name: str) -> None:
        account = user.split(":")[0]
        conn = swiftclient.Connection(authurl=f"{self.iostack.url}/auth/v1.0", user=user,
                                      key=self.keys[user], retries=0)
        container, obj = f"probe-{uuid.uuid4().hex[:8]}", "probe"
        conn.put_container(container)

        def stored_filtered() -> bool:
            conn.put_object(container, obj, b"compressible " * 4096)
            with swift_dir(self.info["swift_dir"]):
                part, nodes = self.ring.get_nodes(f"AUTH_{account}", container, obj)
            headers = direct_client.direct_head_object(
                nodes[0], part, f"AUTH_{account}", container, obj,
                headers={"X-Backend-Iostack-Raw": "true"})
            return filter_name in headers.get(PIPELINE_HEADER, "")

        try:
            if not wait_until(stored_filtered, 30, 0.5):
                raise RuntimeError(f"AUTH_{account} is not under SET {filter_name}")
        finally:
            conn.delete_object(container, obj)
            conn.delete_container(container)


def caused_by_iostack(outcomes: Outcomes, baseline: Outcomes) -> set[str]:
    """Tests that fail through IOStack and do not fail on plain Swift."""
    return outcomes.failed() - baseline.failed()


def report(baseline: Outcomes, runs: list[Outcomes]) -> set[str]:
    """Print counts per configuration; return the failures IOStack causes."""
    print(f"{'configuration':<24}{'passed':>8}{'failed':>8}{'skipped':>9}"
          f"{'also on plain':>15}{'IOStack-caused':>16}{'seconds':>9}")
    caused: set[str] = set()
    for outcomes in [*runs, baseline]:
        own = caused_by_iostack(outcomes, baseline) if outcomes is not baseline else set()
        caused |= {f"[{outcomes.name}] {t}: {outcomes.results[t][1]}" for t in own}
        also = len(outcomes.failed() & baseline.failed())
        print(f"{outcomes.name:<24}{outcomes.count('passed'):>8}{outcomes.count('failed'):>8}"
              f"{outcomes.count('skipped'):>9}{also:>15}{len(own):>16}{outcomes.seconds:>9.0f}")
    for test in sorted(baseline.failed()):
        print(f"fails on plain Swift too: {test}: {baseline.results[test][1]}")
    for line in sorted(caused):
        print(f"IOStack-caused failure: {line}")
    return caused


def run(configs: list[str], selection: list[str], workdir: Path = BUILD / "run",
        baseline: str = "failed") -> tuple[Outcomes, list[Outcomes]]:
    """Plain Swift's and each configuration's outcomes; logs and reports stay in ``workdir``.

    The configurations run at once, each on its own accounts. Plain Swift runs
    ``selection`` too with ``baseline="all"``; with ``"failed"``, only the tests that
    failed through IOStack (none: its outcomes are empty).
    """
    suite = fetch_suite()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with ExitStack() as stack:
        info = stack.enter_context(started_stack(workdir / "aio", *device_args()))
        # The suites test what proxies and object servers do with X-Delete-At, and
        # expect an expired object to read with X-Open-Expired until they are done
        # (test_slo's open-expired test): the all-in-one's expirer, which passes every
        # 10 s for SET EXPIRY, deleted one in between on a loaded machine. Swift's
        # own functional runs have no expirer either.
        ProcessManager(Path(info["state_dir"])).stop("object-expirer")
        conformance = Run(info, suite, workdir, configs)
        for proxy in (conformance.plain, conformance.iostack):
            stack.callback(proxy.stop)
            proxy.start()
        processes = []
        for name in configs:
            accounts = Accounts.of(name)
            stack.enter_context(conformance.policy(CONFIGS[name], accounts))
            process = conformance.start_suite(conformance.iostack, f"IOStack, {name}",
                                              accounts, selection)
            stack.callback(process.kill)  # stopped by a signal: no suite outlives the run
            processes.append(process)
        plain = conformance.start_suite(conformance.plain, "plain Swift", Accounts.of(PLAIN),
                                        selection) if baseline == "all" else None
        runs = [process.wait() for process in processes]
        if plain is None:
            failed = sorted(set().union(*(outcomes.failed() for outcomes in runs)))
            if not failed:
                return Outcomes("plain Swift (not run)"), runs
            plain = conformance.start_suite(conformance.plain, "plain Swift", Accounts.of(PLAIN),
                                            failed)
        stack.callback(plain.kill)
        return plain.wait(), runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetch", action="store_true",
                        help="only fetch the suite (once per Swift version) and print its path")
    parser.add_argument("--quick", action="store_true", help="run QUICK_SELECTION only")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work dir (configs, logs, reports) after a clean run")
    parser.add_argument("--workdir", type=Path, default=BUILD / "run",
                        help="the run's stack, configs, logs and reports (default: %(default)s)")
    parser.add_argument("--baseline", choices=("failed", "all"), default="failed",
                        help="run against plain Swift the tests that failed through IOStack "
                             "(default), or all of them, beside the IOStack runs")
    parser.add_argument("tests", nargs="*", help="test ids under the suite (default: all)")
    args = parser.parse_args(argv)
    # Stopped by a signal, the run still stops its proxies and stack (SystemExit unwinds
    # them); a shell's background job starts with SIGINT ignored.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.fetch:
        print(fetch_suite())
        return 0
    selection = args.tests or (QUICK_SELECTION if args.quick else SUITES)
    workdir = args.workdir.resolve()
    caused = report(*run(args.configs.split(","), selection, workdir, args.baseline))
    if not args.keep and not caused:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if caused else 0

if __name__ == "__main__":
    sys.exit(main())
