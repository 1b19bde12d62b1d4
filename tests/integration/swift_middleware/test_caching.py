"""The proxy cache (``iostack_cache``) on real proxies over the all-in-one's Swift.

Each test proxy is a second proxy-server process on the all-in-one's config
with the cache placed below ``iostack`` and its own cache directory and size.
That a GET was answered from the cache is shown without trusting the cache's
word for it: the object is then deleted directly on every object server
(bypassing all proxies, so no invalidation), and the cache proxy still
returns it while the all-in-one's own proxy answers 404.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from configparser import ConfigParser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from swift.common import direct_client, utils
from swift.common.ring import Ring
from swift.common.utils import Timestamp

from iostack.aio.processes import ProcessManager
from iostack.policy.reader import PolicyReader
from iostack.policy.resolve import RequestInfo
from iostack.ports import free_port, port_open, wait_until
from iostack.swift_middleware.cache.admission import caching_rules, entry_version
from iostack.swift_middleware.cache.store import CacheStore

pytestmark = pytest.mark.integration

KIB = 1024
MIB = 1024 * KIB


def logs(size: int) -> bytes:
    line = b"2026-11-21 GET /v1/AUTH_t1/cache/%06d 200 bytes=%d\n"
    out = bytearray()
    n = 0
    while len(out) < size:
        out += line % (n, n * 13)
        n += 1
    return bytes(out[:size])


@dataclass
class CacheProxy:
    name: str
    port: int
    cache_dir: Path
    cache_size: int

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/v1/AUTH_t1{path}"

    def store(self) -> CacheStore:
        return CacheStore(self.cache_dir, self.cache_size)

    def cached(self) -> list[str]:
        return self.store().paths()


class ProxyStarter:
    """Starts proxies like the all-in-one's, with the cache configured per test."""

    def __init__(self, aio: dict[str, Any], workdir: Path) -> None:
        self.aio = aio
        self.workdir = workdir
        self.manager = ProcessManager(Path(aio["state_dir"]))
        self.started: list[str] = []

    def start(self, cache_size: int = 64 * MIB, cache_dir: Path | None = None,
              workers: int = 1, **options: str) -> CacheProxy:
        swift_dir = Path(self.aio["swift_dir"])
        conf = ConfigParser(interpolation=None)
        conf.read(swift_dir / "proxy-server.conf")
        pipeline = [f for f in conf["pipeline:main"]["pipeline"].split() if f != "iostack_cache"]
        pipeline.insert(pipeline.index("iostack") + 1, "iostack_cache")
        conf["pipeline:main"]["pipeline"] = " ".join(pipeline)
        name = f"cache-test-proxy-{uuid.uuid4().hex[:8]}"
        cache_dir = cache_dir or self.workdir / name
        conf["filter:iostack_cache"] = {
            "use": "egg:iostack#iostack_cache",
            "cache_dir": str(cache_dir),
            "cache_size": str(cache_size),
            # The same Redis and key prefix as the policy middleware.
            "redis_url": conf["filter:iostack"]["redis_url"],
            "key_prefix": conf["filter:iostack"]["key_prefix"],
            **options,
        }
        port = free_port()
        conf["DEFAULT"]["bind_port"] = str(port)
        conf["DEFAULT"]["workers"] = str(workers)
        path = swift_dir / f"{name}.conf"
        with open(path, "w", encoding="utf-8") as f:
            conf.write(f)
        path.chmod(0o600)
        self.manager.start(name, [sys.executable, "-m", "iostack.aio.swift_launcher",
                                  str(swift_dir), str(path), "proxy-server"])
        self.started.append(name)
        if not wait_until(lambda: port_open("127.0.0.1", port), 30):
            raise RuntimeError(f"proxy did not start; see {self.manager.log_file(name)}")
        return CacheProxy(name, port, cache_dir, cache_size)

    def stop_all(self) -> None:
        swift_dir = Path(self.aio["swift_dir"])
        for name in self.started:
            self.manager.stop(name)
            (swift_dir / f"{name}.conf").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def proxies(aio, tmp_path_factory) -> Iterator[ProxyStarter]:
    starter = ProxyStarter(aio, tmp_path_factory.mktemp("iostack-cache"))
    yield starter
    starter.stop_all()


@pytest.fixture(scope="module")
def proxy(proxies) -> CacheProxy:
    return proxies.start()


@pytest.fixture(scope="module")
def token(aio) -> str:
    creds = aio["tenants"]["t1"]
    resp = requests.get(aio["auth_url"], headers={"X-Auth-User": creds["user"],
                                                  "X-Auth-Key": creds["key"]}, timeout=10)
    resp.raise_for_status()
    return resp.headers["X-Auth-Token"]


@pytest.fixture
def http(token) -> Callable[..., requests.Response]:
    def call(method: str, url: str, data: bytes | None = None, **headers: str):
        return requests.request(method, url, data=data, timeout=60,
                                headers={"X-Auth-Token": token, **headers})
    return call


@pytest.fixture
def cached_container(aio, http, policies) -> Callable[[str], str]:
    """A new container of t1 with the given policy actions (``SET CACHING`` ...)."""
    def make(actions: str) -> str:
        name = f"cache-{uuid.uuid4().hex[:10]}"
        created = http("PUT", f"{aio['tenants']['t1']['storage_url']}/{name}")
        assert created.status_code in (201, 202)
        policies.add(f"FOR CONTAINER AUTH_t1/{name} DO {actions}")
        return name
    return make


@pytest.fixture(scope="module")
def delete_on_servers(aio) -> Callable[[str, str], None]:
    """Delete an object on every object server, behind every proxy's back."""
    utils.set_swift_dir(aio["swift_dir"])
    ring = Ring(aio["swift_dir"], ring_name="object")

    def delete(container: str, obj: str) -> None:
        part, nodes = ring.get_nodes("AUTH_t1", container, obj)
        for node in nodes:
            direct_client.direct_delete_object(
                node, part, "AUTH_t1", container, obj,
                headers={"X-Timestamp": Timestamp.now().internal})
    return delete


@pytest.fixture(scope="module")
def put_on_servers(aio) -> Callable[[str, str, bytes], None]:
    """Overwrite an object on every object server, behind every proxy's back."""
    utils.set_swift_dir(aio["swift_dir"])
    ring = Ring(aio["swift_dir"], ring_name="object")

    def put(container: str, obj: str, body: bytes) -> None:
        part, nodes = ring.get_nodes("AUTH_t1", container, obj)
        timestamp = Timestamp.now().internal
        for node in nodes:
            direct_client.direct_put_object(
                node, part, "AUTH_t1", container, obj, body,
                content_type="application/octet-stream", headers={"X-Timestamp": timestamp})
    return put


def fill(proxy: CacheProxy, http, container: str, obj: str, body: bytes) -> None:
    """GET through the cache proxy until the object is in its cache (the policy is new)."""
    path = f"/v1/AUTH_t1/{container}/{obj}"

    def filled() -> bool:
        resp = http("GET", proxy.url(f"/{container}/{obj}"))
        assert resp.status_code == 200 and resp.content == body
        return path in proxy.cached()
    assert wait_until(filled, 5, 0.1), f"{path} never reached the cache"


def version_of(aio, container: str) -> str:
    """The cache version of the container's objects, as the middleware computes it."""
    reader = PolicyReader(aio["redis_url"], prefix=aio["key_prefix"], live=True)
    try:
        levels = reader.lookup(RequestInfo.from_path("GET", f"/v1/AUTH_t1/{container}/x"))[0]
    finally:
        reader.close()
    return entry_version(caching_rules(levels))


def aio_url(aio, container: str, obj: str) -> str:
    return f"{aio['tenants']['t1']['storage_url']}/{container}/{obj}"


# -- hits and misses ---------------------------------------------------------------

def test_hit_after_miss_does_not_read_object_servers(aio, proxy, http, cached_container,
                                                     delete_on_servers):
    container = cached_container("SET CACHING")
    body = os.urandom(100 * KIB)
    assert http("PUT", proxy.url(f"/{container}/o"), body).status_code == 201
    fill(proxy, http, container, "o", body)
    first = http("GET", proxy.url(f"/{container}/o"))

    delete_on_servers(container, "o")
    assert http("GET", aio_url(aio, container, "o")).status_code == 404  # gone from Swift
    resp = http("GET", proxy.url(f"/{container}/o"))
    assert resp.status_code == 200 and resp.content == body
    for header in ("Etag", "Last-Modified", "X-Timestamp", "Content-Type", "Content-Length"):
        assert resp.headers[header] == first.headers[header]
    head = http("HEAD", proxy.url(f"/{container}/o"))
    assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(body)


def test_empty_object_hit(aio, proxy, http, cached_container, delete_on_servers):
    container = cached_container("SET CACHING")
    assert http("PUT", proxy.url(f"/{container}/empty"), b"").status_code == 201
    fill(proxy, http, container, "empty", b"")
    delete_on_servers(container, "empty")
    resp = http("GET", proxy.url(f"/{container}/empty"))
    assert resp.status_code == 200 and resp.content == b""
    assert resp.headers["Etag"] == hashlib.md5(b"").hexdigest()


def test_objects_without_caching_policy_are_not_cached(aio, proxy, http, delete_on_servers,
                                                       cached_container):
    container = cached_container("SET NOOP")
    body = b"plain" * 1000
    assert http("PUT", proxy.url(f"/{container}/o"), body).status_code == 201
    assert http("GET", proxy.url(f"/{container}/o")).content == body
    assert f"/v1/AUTH_t1/{container}/o" not in proxy.cached()
    delete_on_servers(container, "o")
    assert http("GET", proxy.url(f"/{container}/o")).status_code == 404


def test_removed_policy_stops_hits(aio, proxy, http, policies, cached_container,
                                   delete_on_servers):
    container = cached_container("SET CACHING")
    body = os.urandom(10 * KIB)
    http("PUT", proxy.url(f"/{container}/o"), body)
    fill(proxy, http, container, "o", body)
    policies.remove(policies.ids[-1])
    delete_on_servers(container, "o")
    assert wait_until(lambda: http("GET", proxy.url(f"/{container}/o")).status_code == 404, 3)


def test_head_of_large_object_cached_rest_streamed(aio, proxy, http, token, cached_container,
                                                   delete_on_servers):
    head = 256 * KIB
    container = cached_container(f"SET CACHING WITH head={head // KIB}K")
    body = os.urandom(3 * MIB + 5)
    http("PUT", proxy.url(f"/{container}/big"), body)
    fill(proxy, http, container, "big", body)
    entry = proxy.store().lookup(f"/v1/AUTH_t1/{container}/big", version_of(aio, container))
    assert entry is not None and not entry.complete
    assert head <= entry.length < head + 4 * KIB  # the head plus the stored headers
    entry.close()

    # Whole object and ranges across the head/tail boundary come back right.
    resp = http("GET", proxy.url(f"/{container}/big"))
    assert resp.content == body
    resp = http("GET", proxy.url(f"/{container}/big"), Range=f"bytes={head - 10}-{head + 9}")
    assert resp.status_code == 206 and resp.content == body[head - 10:head + 10]

    # Without the object servers the head is still there, the rest is not.
    delete_on_servers(container, "big")
    resp = http("GET", proxy.url(f"/{container}/big"), Range="bytes=1000-1999")
    assert resp.status_code == 206 and resp.content == body[1000:2000]
    got = bytearray()
    with pytest.raises(requests.exceptions.RequestException):
        with requests.get(proxy.url(f"/{container}/big"), stream=True, timeout=30,
                          headers={"X-Auth-Token": token}) as r:
            assert r.status_code == 200
            for chunk in r.iter_content(64 * KIB):
                got += chunk
    assert len(got) >= head and bytes(got[:head]) == body[:head]
    assert len(got) < len(body)


def test_ranges_and_conditionals_from_the_cache(aio, proxy, http, cached_container,
                                                delete_on_servers):
    container = cached_container("SET CACHING")
    body = os.urandom(200 * KIB + 3)
    http("PUT", proxy.url(f"/{container}/o"), body)
    fill(proxy, http, container, "o", body)
    etag = hashlib.md5(body).hexdigest()  # Swift's ETag
    delete_on_servers(container, "o")  # everything below comes from the cache
    url = proxy.url(f"/{container}/o")
    n = len(body)
    for spec, want in [("bytes=0-0", body[:1]), (f"bytes={n - 1}-", body[-1:]),
                       ("bytes=-100", body[-100:]), ("bytes=1000-", body[1000:]),
                       (f"bytes=5-{n + 100}", body[5:])]:
        resp = http("GET", url, Range=spec)
        assert resp.status_code == 206, spec
        assert resp.content == want, spec
    assert http("GET", url, Range=f"bytes={n}-").status_code == 416
    multi = http("GET", url, Range="bytes=0-9,100-109")
    assert multi.status_code == 206
    assert multi.headers["Content-Type"].startswith("multipart/byteranges")
    assert body[:10] in multi.content and body[100:110] in multi.content
    assert http("GET", url, **{"If-None-Match": etag}).status_code == 304
    assert http("GET", url, **{"If-Match": "nope"}).status_code == 412
    assert http("GET", url, **{"If-Match": etag}).content == body


def test_filtered_object_cached_as_stored(aio, proxy, http, cached_container, delete_on_servers,
                                          stored):
    container = cached_container("SET COMPRESSION WITH algorithm=zstd, SET ENCRYPTION, "
                                 "SET CACHING")
    body = logs(2 * MIB + 17)
    http("PUT", proxy.url(f"/{container}/log"), body)
    fill(proxy, http, container, "log", body)
    _, raw = stored("AUTH_t1", container, "log")
    assert len(raw) < len(body) / 5  # compressed, then encrypted

    delete_on_servers(container, "log")  # decoded from the cached stored bytes alone
    url = proxy.url(f"/{container}/log")
    resp = http("GET", url)
    assert resp.status_code == 200 and resp.content == body
    assert resp.headers["Etag"] == hashlib.md5(body).hexdigest()
    start = 1 * MIB - 7
    resp = http("GET", url, Range=f"bytes={start}-{start + 99}")
    assert resp.status_code == 206 and resp.content == body[start:start + 100]
    resp = http("GET", url, Range="bytes=-10")
    assert resp.content == body[-10:]

    # What the proxy keeps on disk is the ciphertext, never the tenant's lines.
    on_disk = b"".join(p.read_bytes() for p in proxy.cache_dir.rglob("*") if p.is_file())
    assert raw[:4096] in on_disk
    for offset in (0, 4096, len(body) // 2, len(body) - 64):
        assert body[offset:offset + 48] not in on_disk


def test_object_stage_filters_under_the_cache(aio, proxy, http, cached_container,
                                              delete_on_servers):
    container = cached_container("SET COMPRESSION WITH algorithm=zstd ON OBJECT, SET CACHING")
    body = logs(600 * KIB + 3)
    http("PUT", proxy.url(f"/{container}/log"), body)
    fill(proxy, http, container, "log", body)
    delete_on_servers(container, "log")
    url = proxy.url(f"/{container}/log")
    assert http("GET", url).content == body
    resp = http("GET", url, Range="bytes=300000-300099")
    assert resp.status_code == 206 and resp.content == body[300000:300100]


def test_other_tenants_and_anonymous_are_refused_on_hits(aio, proxy, http, cached_container,
                                                        swift_for):
    container = cached_container("SET CACHING")
    body = os.urandom(5000)
    http("PUT", proxy.url(f"/{container}/o"), body)
    fill(proxy, http, container, "o", body)
    t2 = swift_for("t2")
    t2.get_auth()
    other = requests.get(proxy.url(f"/{container}/o"), timeout=10,
                         headers={"X-Auth-Token": t2.token})
    assert other.status_code == 403 and body not in other.content
    anonymous = requests.get(proxy.url(f"/{container}/o"), timeout=10)
    assert anonymous.status_code == 401 and body not in anonymous.content
    # A public-read ACL opens it, as it would without the cache.
    http("POST", proxy.url(f"/{container}"), **{"X-Container-Read": ".r:*"})
    assert wait_until(lambda: requests.get(proxy.url(f"/{container}/o"),
                                           timeout=10).content == body, 5)


def test_s3_reads_hit_the_cache(aio, proxy, http, cached_container, delete_on_servers):
    def s3_client(tenant: str, key: str | None = None):
        creds = aio["tenants"][tenant]
        return boto3.client(
            "s3", endpoint_url=f"http://127.0.0.1:{proxy.port}", region_name=aio["s3_region"],
            aws_access_key_id=creds["user"], aws_secret_access_key=key or creds["key"],
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    bucket = cached_container("SET CACHING")
    body = os.urandom(70 * KIB)
    http("PUT", proxy.url(f"/{bucket}/k"), body)
    fill(proxy, http, bucket, "k", body)
    delete_on_servers(bucket, "k")
    s3 = s3_client("t1")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
    ranged = s3.get_object(Bucket=bucket, Key="k", Range="bytes=100-199")["Body"].read()
    assert ranged == body[100:200]
    with pytest.raises(ClientError) as forged:
        s3_client("t1", key="not-the-key").get_object(Bucket=bucket, Key="k")
    assert forged.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AccessDenied")
    with pytest.raises(ClientError) as denied:  # t2's buckets are its own account's
        s3_client("t2").get_object(Bucket=bucket, Key="k")
    assert denied.value.response["Error"]["Code"] == "NoSuchBucket"


# -- eviction ----------------------------------------------------------------------

def test_lru_eviction_by_bytes(aio, proxies, http, cached_container, delete_on_servers):
    size = 200 * KIB
    small = proxies.start(cache_size=650 * KIB)  # three entries fit, four do not
    container = cached_container("SET CACHING")
    bodies = {f"o{i}": os.urandom(size) for i in range(1, 7)}
    for name, body in bodies.items():
        http("PUT", small.url(f"/{container}/{name}"), body)
    prefix = f"/v1/AUTH_t1/{container}/"
    for name in ("o1", "o2", "o3", "o4", "o5"):
        fill(small, http, container, name, bodies[name])
    store = small.store()
    assert sorted(store.paths()) == [prefix + n for n in ("o3", "o4", "o5")]
    assert 3 * size < store.usage() <= small.cache_size
    assert http("GET", small.url(f"/{container}/o3")).content == bodies["o3"]  # o3 used last
    fill(small, http, container, "o6", bodies["o6"])
    assert sorted(store.paths()) == [prefix + n for n in ("o3", "o5", "o6")]  # o4 was LRU
    delete_on_servers(container, "o3")
    delete_on_servers(container, "o4")
    assert http("GET", small.url(f"/{container}/o3")).content == bodies["o3"]
    assert http("GET", small.url(f"/{container}/o4")).status_code == 404


# -- invalidation ------------------------------------------------------------------

def test_put_post_delete_through_the_same_proxy(aio, proxy, http, cached_container):
    container = cached_container("SET CACHING")
    url = proxy.url(f"/{container}/o")
    old, new = os.urandom(3000), os.urandom(4000)
    http("PUT", url, old)
    fill(proxy, http, container, "o", old)
    assert http("PUT", url, new).status_code == 201
    assert http("GET", url).content == new

    fill(proxy, http, container, "o", new)
    assert http("POST", url, **{"X-Object-Meta-Color": "blue"}).status_code == 202
    resp = http("GET", url)
    assert resp.headers.get("X-Object-Meta-Color") == "blue" and resp.content == new

    fill(proxy, http, container, "o", new)
    assert http("DELETE", url).status_code == 204
    assert http("GET", url).status_code == 404
    assert f"/v1/AUTH_t1/{container}/o" not in proxy.cached()


def test_writes_through_another_proxy_invalidate(aio, proxy, proxies, http, cached_container):
    other = proxies.start()
    container = cached_container("SET CACHING")
    path = f"/v1/AUTH_t1/{container}/o"
    versions = [os.urandom(2000 + i) for i in range(3)]
    http("PUT", other.url(f"/{container}/o"), versions[0])
    fill(proxy, http, container, "o", versions[0])

    def proxy_serves(check) -> bool:
        return wait_until(lambda: check(http("GET", proxy.url(f"/{container}/o"))), 3, 0.05)

    assert http("PUT", other.url(f"/{container}/o"), versions[1]).status_code == 201
    assert proxy_serves(lambda r: r.content == versions[1])

    fill(proxy, http, container, "o", versions[1])
    assert http("POST", other.url(f"/{container}/o"), **{"X-Object-Meta-K": "v"}).ok
    assert proxy_serves(lambda r: r.headers.get("X-Object-Meta-K") == "v")

    fill(proxy, http, container, "o", versions[1])
    # The all-in-one's own proxy runs the cache middleware too.
    assert http("DELETE", aio_url(aio, container, "o")).status_code == 204
    assert proxy_serves(lambda r: r.status_code == 404)
    assert path not in proxy.cached()


def test_workers_of_one_proxy_share_entries_and_invalidations(aio, proxies, http,
                                                              cached_container):
    shared = proxies.start(workers=2)
    container = cached_container("SET CACHING")
    url = shared.url(f"/{container}/o")
    for n in range(6):
        body = os.urandom(1000 + n)
        assert http("PUT", url, body).status_code == 201
        for _ in range(4):  # new connections: both workers answer some of these
            resp = http("GET", url)
            assert resp.status_code == 200 and resp.content == body
    assert f"/v1/AUTH_t1/{container}/o" in shared.cached()


def test_writes_behind_the_proxies_back_and_validate_head(aio, proxy, proxies, http,
                                                         cached_container, put_on_servers,
                                                         delete_on_servers):
    validating = proxies.start(validate="head")
    container = cached_container("SET CACHING")
    old, new = os.urandom(5000), os.urandom(6000)
    http("PUT", proxy.url(f"/{container}/o"), old)
    fill(proxy, http, container, "o", old)
    fill(validating, http, container, "o", old)
    put_on_servers(container, "o", new)
    # The default trusts the invalidations, and no proxy saw this write: the
    # documented gap ...
    assert http("GET", proxy.url(f"/{container}/o")).content == old
    # ... which ``validate = head`` closes, checking every hit.
    assert http("GET", validating.url(f"/{container}/o")).content == new
    fill(validating, http, container, "o", new)
    delete_on_servers(container, "o")
    assert http("GET", validating.url(f"/{container}/o")).status_code == 404


# -- failures ----------------------------------------------------------------------

def test_unusable_cache_dir_still_serves(aio, proxies, http, cached_container, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_bytes(b"x")
    broken = proxies.start(cache_dir=blocker / "cache")
    container = cached_container("SET COMPRESSION, SET CACHING")
    body = logs(300 * KIB)
    url = broken.url(f"/{container}/o")
    assert http("PUT", url, body).status_code == 201
    for _ in range(2):
        resp = http("GET", url)
        assert resp.status_code == 200 and resp.content == body
    assert http("GET", url, Range="bytes=10-19").content == body[10:20]
    assert http("DELETE", url).status_code == 204
    assert http("GET", url).status_code == 404


def test_failing_fills_leave_responses_intact(aio, proxies, http, cached_container):
    failing = proxies.start()
    container = cached_container("SET CACHING")
    body = os.urandom(150 * KIB)
    url = failing.url(f"/{container}/o")
    http("PUT", url, body)  # the worker has opened its cache by now
    tmp = failing.cache_dir / "tmp"
    shutil.rmtree(tmp)
    tmp.write_bytes(b"fills cannot create files in here")  # every fill fails to open
    for _ in range(3):
        resp = http("GET", url)
        assert resp.status_code == 200 and resp.content == body
    assert not [p for p in (failing.cache_dir / "data").rglob("*") if p.is_file()]
    assert http("GET", url, Range="bytes=0-9").content == body[:10]


def test_range_miss_fills_the_head_on_the_side(aio, proxy, http, cached_container,
                                               delete_on_servers):
    head = 128 * KIB
    container = cached_container(f"SET CACHING WITH head={head // KIB}K")
    small, big = os.urandom(50 * KIB), os.urandom(1 * MIB)
    http("PUT", proxy.url(f"/{container}/small"), small)
    http("PUT", proxy.url(f"/{container}/big"), big)
    for name, body in (("small", small), ("big", big)):
        resp = http("GET", proxy.url(f"/{container}/{name}"), Range="bytes=20000-20999")
        assert resp.status_code == 206 and resp.content == body[20000:21000]
    paths = {f"/v1/AUTH_t1/{container}/{n}" for n in ("small", "big")}
    assert wait_until(lambda: paths <= set(proxy.cached()), 5)

    delete_on_servers(container, "small")
    delete_on_servers(container, "big")
    assert http("GET", proxy.url(f"/{container}/small")).content == small
    resp = http("GET", proxy.url(f"/{container}/big"), Range=f"bytes=0-{head - 1}")
    assert resp.status_code == 206 and resp.content == big[:head]


def test_expired_objects_are_not_served(aio, proxy, http, cached_container):
    container = cached_container("SET CACHING")
    body = os.urandom(1000)
    url = proxy.url(f"/{container}/o")
    http("PUT", url, body, **{"X-Delete-After": "2"})
    fill(proxy, http, container, "o", body)
    assert wait_until(lambda: http("GET", url).status_code == 404, 6, 0.2)
    assert f"/v1/AUTH_t1/{container}/o" not in proxy.cached()


def test_tail_of_an_object_whose_name_has_a_percent(aio, proxy, http, cached_container):
    container = cached_container("SET CACHING WITH head=64K")
    body = os.urandom(300 * KIB)
    name = "dir%2Fname%41 ü"
    quoted = requests.utils.quote(name)
    http("PUT", proxy.url(f"/{container}/{quoted}"), body)
    fill(proxy, http, container, quoted, body)
    assert http("GET", proxy.url(f"/{container}/{quoted}")).content == body


def test_a_policy_reverted_and_enforced_again_serves_the_new_object(aio, proxy, http, policies):
    """Regression: a dynamic caching policy's rules came back byte-identical after a
    revert, so the entry version repeated and the cache served the object as it
    was before the revert, although it was overwritten (no caching rule, so no
    invalidation) while the policy was off."""
    import redis

    from iostack.controller.policy_store import PolicyStore
    from iostack.controller.registry import Registries
    from iostack.policy.redis_keys import KeySpace

    container = f"cache-{uuid.uuid4().hex[:10]}"
    assert http("PUT", f"{aio['tenants']['t1']['storage_url']}/{container}").ok
    # Never true: only this test switches it (not TRANSIENT: the actor never reverts it).
    (pid,) = policies.add(f"FOR CONTAINER AUTH_t1/{container} "
                          "WHEN PUTS_SEC > 1000000000 DO SET CACHING")
    keys = KeySpace(aio["key_prefix"])
    client = redis.Redis.from_url(aio["redis_url"])
    store = PolicyStore(client, keys, Registries(client, keys))
    old, new = os.urandom(3000), os.urandom(3001)
    url = proxy.url(f"/{container}/o")
    try:
        store.enforce(pid)
        policies.wait_enforced()
        assert http("PUT", url, old).status_code == 201
        fill(proxy, http, container, "o", old)
        store.revert(pid)
        policies.wait_enforced()
        assert http("PUT", url, new).status_code == 201
        store.enforce(pid)
        policies.wait_enforced()
        resp = http("GET", url)
        assert resp.status_code == 200 and resp.content == new
    finally:
        client.close()


def test_old_versions_read_right_through_a_caching_proxy(aio, proxy, http, cached_container):
    """A version lives under a reserved name; whole and ranged reads of it through the
    cache proxy (which does not keep versions: their container has no caching rule)."""
    head = 128 * KIB
    container = cached_container(f"SET CACHING WITH head={head // KIB}K, SET COMPRESSION")
    http("POST", proxy.url(f"/{container}"), **{"X-Versions-Enabled": "true"})
    old, new = os.urandom(1 * MIB + 7), os.urandom(300 * KIB)
    http("PUT", proxy.url(f"/{container}/v"), old)
    http("PUT", proxy.url(f"/{container}/v"), new)
    listing = http("GET", proxy.url(f"/{container}?versions&format=json")).json()
    version = [o["version_id"] for o in listing if o["name"] == "v"][-1]  # the oldest
    url = proxy.url(f"/{container}/v?version-id={version}")
    resp = http("GET", url, Range="bytes=20000-20999")
    assert resp.status_code == 206 and resp.content == old[20000:21000]
    assert http("GET", url).content == old
    resp = http("GET", url, Range=f"bytes={head - 5}-{head + 5}")
    assert resp.status_code == 206 and resp.content == old[head - 5:head + 6]
    assert http("GET", proxy.url(f"/{container}/v")).content == new
