"""Swift's internal clients over one host's Swift config, for work on stored objects.

Two pipelines, built from ``<swift_dir>/proxy-server.conf`` (its memcache and
its ``[filter:iostack]`` section, so the policy store and key file are the
proxies' own):

- ``raw``: ``catch_errors proxy-logging cache proxy-server``. A HEAD with
  ``X-Backend-Iostack-Raw`` answers the stored length and both layers'
  filter records (sysmeta is not filtered out of internal requests).
- ``tenant``: the same with IOStack's proxy middleware in it. A GET reads
  what the tenant stored (the records undone); a PUT is encoded under
  today's policy, as a tenant's would be.

No gatekeeper and no auth: as for Swift's own daemons, whoever can read the
Swift config and rings is trusted with every account.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from configparser import ConfigParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from swift.common import constraints, storage_policy, utils
from swift.common.internal_client import InternalClient
from swift.common.wsgi import ConfigString

from iostack.stored_object import RAW_HEADER

USER_AGENT = "iostack-atrest"
_setup_lock = threading.Lock()
_configured: set[str] = set()


def _point_swift_at(swift_dir: str) -> None:
    """Make Swift read swift.conf (policies, hash prefix, constraints) from ``swift_dir``."""
    with _setup_lock:
        if swift_dir in _configured:
            return
        utils.set_swift_dir(swift_dir)
        constraints.reload_constraints()
        storage_policy.reload_storage_policies()
        _configured.add(swift_dir)


def _sections(swift_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The proxies' ``[filter:cache]`` and ``[filter:iostack]`` settings."""
    conf = ConfigParser(interpolation=None)
    path = swift_dir / "proxy-server.conf"
    if not conf.read(path):
        raise FileNotFoundError(f"{path} is missing: is {swift_dir} a Swift proxy's config dir?")
    cache = dict(conf["filter:cache"]) if conf.has_section("filter:cache") else {}
    if not conf.has_section("filter:iostack"):
        raise ValueError(f"{path} has no [filter:iostack]: IOStack is not in its pipeline")
    return cache, dict(conf["filter:iostack"])


def _pipeline_conf(swift_dir: Path, cache: dict[str, str], iostack: dict[str, str] | None) -> str:
    names = ["catch_errors", "proxy-logging"] + (["cache"] if cache else [])
    sections = [f"[DEFAULT]\nswift_dir = {swift_dir}\nlog_name = {USER_AGENT}\n",
                "[filter:catch_errors]\nuse = egg:swift#catch_errors\n",
                "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n",
                "[app:proxy-server]\nuse = egg:swift#proxy\n"]
    if cache:
        sections.append("[filter:cache]\n" + "".join(f"{k} = {v}\n" for k, v in cache.items()
                                                     if k not in ("here", "__file__")))
    if iostack is not None:
        names.append("iostack")
        sections.append("[filter:iostack]\n" + "".join(
            f"{k} = {v}\n" for k, v in iostack.items() if k not in ("here", "__file__")))
    sections.insert(1, f"[pipeline:main]\npipeline = {' '.join(names)} proxy-server\n")
    return "\n".join(sections)


class SwiftAccess:
    """The ``raw`` and ``tenant`` internal clients of one Swift config dir (lazily built)."""

    def __init__(self, swift_dir: str | Path, request_tries: int = 3) -> None:
        self.swift_dir = Path(swift_dir)
        self.request_tries = request_tries
        self._raw: InternalClient | None = None
        self._tenant: InternalClient | None = None
        self._iostack: dict[str, str] | None = None

    @property
    def iostack_conf(self) -> dict[str, str]:
        """The proxies' ``[filter:iostack]`` settings (policy store, key file)."""
        if self._iostack is None:
            self._iostack = _sections(self.swift_dir)[1]
        return self._iostack

    def _client(self, with_iostack: bool) -> InternalClient:
        _point_swift_at(str(self.swift_dir))
        cache, iostack = _sections(self.swift_dir)
        conf = ConfigString(_pipeline_conf(self.swift_dir, cache,
                                           iostack if with_iostack else None))
        return InternalClient(conf, USER_AGENT, self.request_tries)

    @property
    def raw(self) -> InternalClient:
        if self._raw is None:
            self._raw = self._client(with_iostack=False)
        return self._raw

    @property
    def tenant(self) -> InternalClient:
        if self._tenant is None:
            self._tenant = self._client(with_iostack=True)
        return self._tenant

    # -- reads ------------------------------------------------------------------

    def stored_headers(self, account: str, container: str, obj: str) -> dict[str, str] | None:
        """Headers of the object as stored (length, records, sysmeta); None if absent."""
        resp = self.raw.make_request("HEAD", object_path(account, container, obj),
                                     {RAW_HEADER: "true"}, (2, 404))
        if resp.status_int == 404:
            return None
        return dict(resp.headers)

    def object_count(self, account: str, container: str) -> int:
        """Objects in a container, from its database (0 if it does not exist)."""
        resp = self.raw.make_request("HEAD", "/v1/" + "/".join(
            quote(p) for p in (account, container)), {}, (2, 404))
        return int(resp.headers.get("X-Container-Object-Count", 0)) if resp.is_success else 0

    def containers(self, account: str) -> Iterator[dict[str, Any]]:
        yield from self.raw.iter_containers(account, acceptable_statuses=(2, 404))

    def objects(self, account: str, container: str, marker: str = "",
                prefix: str = "") -> Iterator[dict[str, Any]]:
        """Listing entries (name, bytes and hash as the tenant sees them, last_modified ...)."""
        yield from self.raw.iter_objects(account, container, marker=marker, prefix=prefix,
                                         acceptable_statuses=(2, 404))

    def read(self, account: str, container: str, obj: str,
             limit: int | None = None) -> tuple[dict[str, str], bytes] | None:
        """What the tenant reads (its first ``limit`` bytes, for a non-empty object),
        decoded by IOStack; None if absent."""
        headers = {"Range": f"bytes=0-{limit - 1}"} if limit else {}
        resp = self.tenant.make_request("GET", object_path(account, container, obj), headers,
                                        (2, 404))
        if resp.status_int == 404:
            utils.close_if_possible(resp.app_iter)
            return None
        return dict(resp.headers), resp.body


def object_path(account: str, container: str, obj: str) -> str:
    return "/v1/" + "/".join(quote(part) for part in (account, container, obj))
