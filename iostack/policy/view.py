"""One view of a request and one policy resolution, shared by every IOStack middleware.

Like Swift's keymaster leaves one key callback in the WSGI environ for the
crypto middlewares, the first IOStack middleware that sees a tenant request
(``iostack_metrics`` in the proxy pipeline) builds a ``RequestView`` and
leaves it in ``env["iostack.view"]``; ``iostack_qos``, ``iostack_select``,
``iostack`` and ``iostack_cache`` find it there with ``view_for(env)``. The
view holds:

- what the request is: method, account, container and object decoded once
  (real unicode names), size, content type and ``X-Object-Meta-*`` tags;
- where its bytes land under whose policy (``policy_paths``): an S3
  multipart part stored in ``<bucket>+segments`` and a version archived by
  Swift's versioning land under the rules of the container the tenant
  wrote to, merged with those of the container that stores them;
- whether Swift authorizes it (``authorized``), asked once the way the proxy
  server asks, so nothing is metered, shaped or parsed for a client that
  will be refused;
- the policy lookup and the resolution, each computed once (memoized).

A view describes one request, in one environ: a sub-request (a copy's GET
of its source, a segment read, the PUT that copy sends down with a copy of
the original environ) gets a view of its own. On GET and
HEAD, ``TO`` conditions on the object's size, type or tags are evaluated on
the stored object's attributes, fetched with one HEAD sub-request only when
a rule that concerns the request has such a condition.

``explain`` on the controller resolves the same ``RequestInfo`` with the
same reader code (``iostack.policy.reader``), so what it shows is what
runs here.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from swift.common.request_helpers import split_reserved_name
from swift.common.swob import Request, wsgi_quote, wsgi_to_str
from swift.common.utils import RESERVED_STR, split_path
from swift.proxy.controllers.base import get_container_info

from iostack.filters.metadata import FilterMetadata
from iostack.filters.regex import RegexError
from iostack.policy.reader import PolicyReader, PolicyStoreUnavailable
from iostack.policy.resolve import Level, RequestInfo, Resolution, resolve

ENV_KEY = "iostack.view"
SUBREQUEST_SOURCE = "IOSTACK"
# s3api stores the parts of a multipart upload into <bucket> in <bucket>+segments,
# as <object>/<upload id>/<part number> (and an <object>/<upload id> marker).
S3_SEGMENTS_SUFFIX = "+segments"
# Swift's versioning middlewares: the legacy one (X-Versions-Location,
# X-History-Location) and object versioning (X-Versions-Enabled, S3 versioning).
VERSIONING_SOURCES = ("VW", "OV")
OBJECT_VERSIONS = "versions"
WRITE_METHODS = ("PUT", "POST", "COPY", "DELETE")
# The age a write-back of a stored object gives it for TO OBJECT_AGE (seconds): only
# IOStack's reconcile daemon sends it (gatekeeper strips X-Backend-* from clients).
AGE_HEADER = "X-Backend-Iostack-Object-Age"
# TO conditions that need the object's attributes (a name condition needs only its name).
ATTRIBUTE_CONDITIONS = ("size", "tag", "type")

Lookup = tuple[list[Level], Mapping[str, FilterMetadata], Mapping[str, list[str]]]

# The tenant's writes under way in this worker, by transaction id: the legacy
# versioning middleware archives an object into a container named only in the
# origin container's metadata, with a sub-request that carries the transaction id.
_writes: weakref.WeakValueDictionary[str, RequestView] = weakref.WeakValueDictionary()


def _s3_segment_origin(container: str, obj: str | None) -> tuple[str, str | None] | None:
    if not container.endswith(S3_SEGMENTS_SUFFIX) or len(container) == len(S3_SEGMENTS_SUFFIX):
        return None
    bucket = container[:-len(S3_SEGMENTS_SUFFIX)]
    if obj is None:
        return bucket, None
    head, _, tail = obj.rpartition("/")
    if tail.isdigit() and "/" in head:  # <object>/<upload id>/<part>
        head = head.rpartition("/")[0]
    return bucket, head or obj


def _object_versions_origin(container: str, obj: str | None) -> tuple[str, str | None] | None:
    if not container.startswith(RESERVED_STR):
        return None
    try:
        kind, origin = split_reserved_name(container)
    except ValueError:
        return None
    if kind != OBJECT_VERSIONS or not origin:
        return None
    if obj and obj.startswith(RESERVED_STR):
        try:
            obj = split_reserved_name(obj)[0]
        except ValueError:
            pass
    return origin, obj


class RequestView:
    """What IOStack knows of one request; see the module docstring."""

    def __init__(self, env: dict[str, Any], account: str, container: str | None,
                 obj: str | None, app: Any = None, internal: bool = False) -> None:
        self.method = env["REQUEST_METHOD"]
        self.path_info = env["PATH_INFO"]
        self.account, self.container, self.obj = account, container, obj
        self.internal = internal  # IOStack's own sub-request: nothing acts on it
        self._env = env
        self._app = app  # below the middleware that built the view: for the HEAD of GET conditions
        length = env.get("CONTENT_LENGTH")
        self.size: int | None = int(length) if length and length.isdigit() else None
        self.content_type: str | None = env.get("CONTENT_TYPE") or None
        self.tags = {k[len("HTTP_X_OBJECT_META_"):].lower().replace("_", "-"): wsgi_to_str(v)
                     for k, v in env.items() if k.startswith("HTTP_X_OBJECT_META_")}
        self.policy_paths = self._policy_paths(env)
        self.age = _age(env.get("HTTP_" + AGE_HEADER.upper().replace("-", "_"), ""))
        self._authorized: bool | None = None
        self._lookup: Lookup | None = None
        self._resolution: Resolution | None = None
        self._attributes_read = self.method not in ("GET", "HEAD")
        if self.method in WRITE_METHODS and obj and "swift.trans_id" in env \
                and not env.get("swift.source"):
            _writes[env["swift.trans_id"]] = self

    def describes(self, env: dict[str, Any]) -> bool:
        # The same environ, not a copy: copy's sink PUT, made with a copy of the
        # original environ, has the source's size and metadata, not this request's.
        return (env is self._env and env["REQUEST_METHOD"] == self.method
                and env["PATH_INFO"] == self.path_info)

    def _policy_paths(self, env: dict[str, Any]) -> tuple[tuple[str | None, str | None], ...]:
        own = (self.container, self.obj)
        if not self.container:
            return (own,)
        origin = (_s3_segment_origin(self.container, self.obj)
                  or _object_versions_origin(self.container, self.obj))
        if origin is None and env.get("swift.source") in VERSIONING_SOURCES:
            write = _writes.get(env.get("swift.trans_id", ""))
            if write is not None and write.account == self.account:
                origin = (write.container, write.obj)
        return (origin, own) if origin and origin != own else (own,)

    @property
    def info(self) -> RequestInfo:
        return RequestInfo(self.method, self.account, self.container, self.obj, self.size,
                           self.content_type, self.tags, self.policy_paths, self.age)

    # -- authorization ---------------------------------------------------------
    def authorized(self) -> bool:
        """Whether Swift's auth lets this request through, asked as the proxy server asks
        it (with the container's ACL); memoized. Without an auth middleware, yes."""
        if self._authorized is None:
            self._authorized = self.internal or self._ask_authorize()
        return self._authorized

    def _ask_authorize(self) -> bool:
        authorize = self._env.get("swift.authorize")
        if authorize is None:
            return True
        # Asked on a copy of the environ: the ACL set here (swob keeps it in the
        # environ) and what the auth middleware notes there (swift_owner) must not
        # reach the proxy server's own check, which asks container POST, PUT and
        # DELETE with no ACL at all.
        req = Request(dict(self._env))
        acl = self._acl_name()
        if acl and self._app is not None:
            info = get_container_info(self._env, self._app, swift_source=SUBREQUEST_SOURCE)
            req.acl = info.get(acl)
            if acl == "write_acl":
                req.environ["swift_sync_key"] = info.get("sync_key")
        return authorize(req) is None

    def _acl_name(self) -> str | None:
        """The container ACL the proxy server sets before it asks auth about this request:
        read for object and container reads, write for object writes, none otherwise."""
        if not self.container:
            return None
        if self.method in ("GET", "HEAD"):
            return "read_acl"
        return "write_acl" if self.obj else None

    # -- policies --------------------------------------------------------------
    def lookup(self, reader: PolicyReader) -> Lookup:
        """The rules and vocabulary for this request: one reader lookup per request.

        Raises ``PolicyStoreUnavailable`` (not memoized: a retry may succeed)."""
        if self._lookup is None:
            self._lookup = reader.lookup(self.info)
        return self._lookup

    def resolution(self, reader: PolicyReader) -> Resolution:
        """The pipeline for this request, and why (memoized)."""
        if self._resolution is None:
            levels, filters, object_types = self.lookup(reader)
            if not self._attributes_read and _needs_attributes(levels):
                self._read_attributes()
            try:
                self._resolution = resolve(self.info, levels, filters, object_types)
            except RegexError as exc:
                # A pattern stored before patterns were checked with RE2: the
                # rules cannot be evaluated, so writes fail closed like on a lost store.
                raise PolicyStoreUnavailable(
                    f"a stored policy pattern cannot be evaluated: {exc}") from None
        return self._resolution

    def _read_attributes(self) -> None:
        """Size, type and tags of the stored object, as the tenant wrote them (one HEAD)."""
        self._attributes_read = True
        if self._app is None or not self.obj:
            return
        # Of the client's query only the version it names: the rest (a selection
        # asked by query, multipart-manifest=...) would change what the HEAD answers.
        version = parse_qs(self._env.get("QUERY_STRING", "")).get("version-id")
        query = f"?{urlencode({'version-id': version[0]})}" if version else ""
        head = Request.blank(wsgi_quote(self.path_info) + query)
        head.environ.update({k: self._env[k] for k in
                             ("swift.authorize", "swift.authorize_override", "swift.trans_id",
                              "swift.infocache", "swift.cache", "REMOTE_USER")
                             if k in self._env})
        head.environ.update({"REQUEST_METHOD": "HEAD", "swift.source": SUBREQUEST_SOURCE})
        head.environ[ENV_KEY] = RequestView(head.environ, self.account, self.container,
                                            self.obj, internal=True)
        resp = head.get_response(self._app)
        if not resp.is_success:
            return
        self.size = resp.content_length
        self.content_type = resp.headers.get("Content-Type")
        self.tags = {k[len("x-object-meta-"):].lower(): v for k, v in resp.headers.items()
                     if k.lower().startswith("x-object-meta-")}


def _needs_attributes(levels: list[Level]) -> bool:
    return any(cond.get("kind") in ATTRIBUTE_CONDITIONS
               for level in levels for rule in level.rules
               for cond in rule.get("object_conds", ()))


def view_for(env: dict[str, Any], app: Any = None) -> RequestView | None:
    """The view of ``env``'s request: the one already in ``env`` if it describes this
    request, else a new one left there. None for anything but ``/v1/<account>...``.

    ``app`` is the caller's next WSGI app, used for the container info that
    authorization needs and for the HEAD of GET conditions."""
    view = env.get(ENV_KEY)
    if view is not None and view.describes(env):
        return view
    try:
        version, account, container, obj = split_path(
            wsgi_quote(env.get("PATH_INFO", "")), 2, 4, True)
    except ValueError:
        return None
    if version not in ("v1", "v1.0"):
        return None
    view = RequestView(env, unquote(account), _unquoted(container), _unquoted(obj), app,
                       internal=env.get("swift.source") == SUBREQUEST_SOURCE)
    env[ENV_KEY] = view
    return view


def _age(text: str) -> float:
    try:
        age = float(text)
    except ValueError:
        return 0.0  # absent: a write makes a new object
    return age if 0 <= age < float("inf") else 0.0


def _unquoted(name: str | None) -> str | None:
    # Real (unicode) names, as policies name them: decoded once, here.
    return unquote(name) if name else None
