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
   keys generated for this run (accounts ``AUTH_test`` and ``AUTH_test2``);
3. runs the suite against plain Swift (the baseline), then against IOStack in
   each configuration: no policy, ``SET COMPRESSION`` and ``SET ENCRYPTION``
   for both test tenants (checked on a stored probe object before the run);
4. prints pass/fail/skip counts per configuration and the tests that fail
   through IOStack but pass on plain Swift: only those count against IOStack
   (exit status 1). Tests failing on plain Swift too are listed as such.

Tests are skipped only where the generated ``test.conf`` says why (its
comments): no third-party auth (Keystone), one reseller prefix (service
tokens), no s3_acl in the proxy's s3api. On devices that are not XFS,
``NEEDS_LARGE_XATTRS`` are deselected, and the run says so.

    .venv/bin/python tests/integration/conformance/swift_suite.py            # the full suite
    .venv/bin/python tests/integration/conformance/swift_suite.py --quick    # QUICK_SELECTION
    ... --configs compression --keep   # one configuration; keep build/swift-tests/run/

``make conformance`` runs the full suite; ``make test`` runs ``--quick`` through
``test_swift_suite.py``.
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

from iostack.aio.services import free_port, wait_until
from iostack.aio.session import started_stack
from iostack.aio.state import write_private_text
from iostack.aio.swift import launcher_command
from iostack.controller.client import ControllerClient
from iostack.swift_middleware.enforce.record import PIPELINE_HEADER

CHECKOUT = Path(__file__).resolve().parents[3]
BUILD = CHECKOUT / "build" / "swift-tests"
SUITES = ["test/functional", "test/s3api"]
# The suite's own dependencies (its test-requirements.txt) that IOStack's venv lacks:
# test/functional/s3api drives S3 with boto 2. Installed beside the suite, on its
# PYTHONPATH only.
SUITE_DEPS = ["boto==2.49.0"]
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
# Middlewares a plain Swift proxy does not have.
NOT_SWIFT = {"iostack_metrics", "iostack_qos", "iostack_select", "storlet_handler", "iostack",
             "iostack_cache"}
# tempauth users of Swift's functional tests (test/sample.conf): account, user, groups.
USERS = [("test", "tester", ".admin"), ("test", "tester2", ".admin"), ("test", "tester3", ""),
         ("test2", "tester2", ".admin")]
TENANTS = ("test", "test2")


def swift_version() -> str:
    return importlib.metadata.version("swift")


def fetch_suite(root: Path = BUILD) -> Path:
    """The installed Swift version's ``test/`` tree, from its sdist on first use, with
    the suite's own dependencies that IOStack does not have in ``deps/`` beside it."""
    version = swift_version()
    target = root / f"swift-{version}"
    if (target / "deps" / SUITE_DEPS_STAMP).is_file():
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


def read_junit(path: Path, name: str) -> Outcomes:
    outcomes = Outcomes(name)
    for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314 - our own report
        test = f"{case.get('classname')}::{case.get('name')}"
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
                 plain: bool) -> None:
        self.swift_dir = Path(info["swift_dir"])
        self.conf = ConfigParser(interpolation=None)
        self.conf.read(self.swift_dir / "proxy-server.conf")
        if plain:
            pipeline = self.conf["pipeline:main"]["pipeline"].split()
            self.conf["pipeline:main"]["pipeline"] = " ".join(p for p in pipeline
                                                              if p not in NOT_SWIFT)
        for account, user, groups in USERS:
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


def test_conf(proxy: Proxy, keys: dict[str, str]) -> str:
    """Swift's ``test.conf`` for this proxy and these users; comments say what is skipped."""
    # S3 users: two owners of AUTH_test and an unprivileged one, as test/sample.conf has them.
    s3_users = ["test:tester", "test:tester2", "test:tester3"]
    func_s3 = "\n".join(f"s3_access_key{n} = {user}\ns3_secret_key{n} = {keys[user]}"
                        for n, user in zip(["", "2", "3"], s3_users, strict=True))
    s3api = "\n".join(f"access_key{n} = {user}\nsecret_key{n} = {keys[user]}"
                      for n, user in enumerate(s3_users, 1))
    return f"""\
# Generated by tests/integration/conformance/swift_suite.py for one run.
# Skipped on purpose, and why:
# - account4/username4 (Keystone v3 domains) and account6/username6: the
#   all-in-one authenticates with tempauth (iostack aio start --auth keystone
#   is a separate configuration).
# - account5/username5 and service_prefix (service tokens): tempauth has one
#   reseller prefix, AUTH_.
# - s3_acl_tests_enabled = False: the proxy's s3api runs without s3_acl, as
#   Swift's own default.
# - storage_domain is empty: the proxy has no domain_remap.
# Skipped by the suites themselves, for what the all-in-one is: testPUTError
# (the proxy allows account management), staticweb (not in the pipeline),
# S3 server-side encryption headers (Swift's keymaster is not in the
# pipeline), request timeouts (need the suite's in-process servers).
[func_test]
auth_uri = {proxy.url}/auth/v1.0
s3_storage_url = {proxy.url}/
s3_region = us-east-1
account = test
username = tester
password = {keys['test:tester']}
{func_s3}
account2 = test2
username2 = tester2
password2 = {keys['test2:tester2']}
username3 = tester3
password3 = {keys['test:tester3']}
collate = C
storage_domain =

[s3api_test]
endpoint = {proxy.url}
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


class Run:
    """One stack, its two proxies, and the suite run against either in a configuration."""

    def __init__(self, info: dict[str, Any], suite: Path, workdir: Path,
                 selection: list[str]) -> None:
        self.info = info
        self.suite = suite
        self.workdir = workdir
        self.selection = selection
        self.keys = {f"{a}:{u}": secrets.token_urlsafe(18) for a, u, _ in USERS}
        self.plain = Proxy(info, workdir, "plain", self.keys, plain=True)
        self.iostack = Proxy(info, workdir, "iostack", self.keys, plain=False)
        self.admin = ControllerClient(info["controller_url"], info["admin_token"])
        with swift_dir(info["swift_dir"]):
            self.ring = Ring(info["swift_dir"], ring_name="object")
        self.deselected: list[str] = []
        devices_fs = device_filesystem(Path(info["state_dir"]) / "srv" / "node")
        if devices_fs != "xfs":
            self.deselected = NEEDS_LARGE_XATTRS
            print(f"devices on {devices_fs}, not xfs: deselected {' '.join(self.deselected)}",
                  flush=True)

    def suite_run(self, proxy: Proxy, name: str) -> Outcomes:
        conf = self.workdir / f"{name}-test.conf"
        write_private_text(conf, test_conf(proxy, self.keys))
        report = self.workdir / f"{name}.xml"
        env = {**os.environ, "SWIFT_TEST_CONFIG_FILE": str(conf), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": str(self.suite / "deps")}
        started = time.monotonic()
        with open(self.workdir / f"{name}.log", "wb") as log:
            subprocess.run(  # noqa: S603 - pytest on the fetched suite
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                 "-q", "--rootdir", str(self.suite), f"--junitxml={report}", *self.selection,
                 *(f"--deselect={test}" for test in self.deselected)],
                cwd=self.suite, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        outcomes = read_junit(report, name)
        outcomes.seconds = time.monotonic() - started
        print(f"{name}: {outcomes.count('passed')} passed, {outcomes.count('failed')} failed, "
              f"{outcomes.count('skipped')} skipped in {outcomes.seconds:.0f} s", flush=True)
        return outcomes

    @contextmanager
    def policy(self, filter_name: str | None) -> Iterator[None]:
        """``SET <filter>`` on both test tenants for the block, checked on a stored object."""
        if filter_name is None:
            yield
            return
        added = self.admin.add_policies(
            "\n".join(f"FOR TENANT {t} DO SET {filter_name}" for t in TENANTS))
        try:
            for tenant in TENANTS:
                self._check_enforced(tenant, filter_name.lower())
            yield
        finally:
            for record in added["policies"]:
                self.admin.delete_policy(record["id"])

    def _check_enforced(self, account: str, filter_name: str) -> None:
        user = "tester" if account == "test" else "tester2"
        conn = swiftclient.Connection(authurl=f"{self.iostack.url}/auth/v1.0",
                                      user=f"{account}:{user}",
                                      key=self.keys[f"{account}:{user}"], retries=0)
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
    for outcomes in [baseline, *runs]:
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


def run(configs: list[str], selection: list[str], workdir: Path = BUILD / "run"
        ) -> tuple[Outcomes, list[Outcomes]]:
    """Plain Swift's and each configuration's outcomes; logs and reports stay in ``workdir``."""
    suite = fetch_suite()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with ExitStack() as stack:
        info = stack.enter_context(started_stack(workdir / "aio", *device_args()))
        conformance = Run(info, suite, workdir, selection)
        for proxy in (conformance.plain, conformance.iostack):
            stack.callback(proxy.stop)
            proxy.start()
        runs = []
        for name in configs:
            with conformance.policy(CONFIGS[name]):
                runs.append(conformance.suite_run(conformance.iostack, f"IOStack, {name}"))
        baseline = conformance.suite_run(conformance.plain, "plain Swift")
    return baseline, runs


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
    caused = report(*run(args.configs.split(","), selection, workdir))
    if not args.keep and not caused:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if caused else 0

if __name__ == "__main__":
    sys.exit(main())
