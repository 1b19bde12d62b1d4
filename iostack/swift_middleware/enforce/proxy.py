"""IOStack proxy middleware: enforce the tenants' policies on object requests.

On PUT it asks the policy contract's reader (``iostack.policy.reader``) which filters apply
(one cached lookup; a policy change reaches it through Redis pub/sub), runs
the body through their encoders on its way to the object servers, and records
in the object's sysmeta what it did (``record``). On GET and HEAD it undoes
exactly what that record says, whatever today's policies are, so tenants read
back what they stored; objects without a record pass through untouched.

Place it after the auth middleware and, like Swift's own encryption, below
``copy``, ``slo``, ``dlo``, ``versioned_writes`` and ``symlink``, right before
``proxy-logging proxy-server``: the sub-requests those middlewares make for
copies and large-object segments must be encoded and decoded too.

Configuration (``[filter:iostack]`` in proxy-server.conf)::

    use = egg:iostack#iostack_proxy
    redis_url = redis://127.0.0.1:6379/0   # the controller's Redis
    key_prefix = iostack:                  # the controller's key prefix
    key_file = /etc/iostack/root.key       # root secret for the encryption filter
    policy_snapshot = /var/lib/iostack/policy-<digest>.json  # the node's copy of the policies
    policy_poll_interval = 1               # seconds between checks of the store's version
    sandboxed_decode_stage = object        # or proxy: where GETs undo sandboxed filters
    filter_threads = true                  # compress/encrypt off the event loop (filters.offload)
    filter_thread_min_us = 200             # ... when a batch costs more than a hand-off
    keep_incompressible = true             # store bodies that would not compress as they came
    client_timeout = 60                    # seconds a client may stall those bodies' first bytes

Stages: filters staged ``ON PROXY`` (the default) run here; those staged
``ON OBJECT`` are checked here and handed to the object servers' middleware
(``iostack.swift_middleware.enforce.object``) in a backend header. Sandboxed filters
(uploaded code, ``extra.runtime == "storlet"``) run in the tenant's Storlets
sandbox, called from here on PUT and GET (``sandboxed``), in pipeline order
among native ones; ``swift_dir`` locates the Storlets gateway config. On GET
the sandboxed filter nearest the stored bytes is undone at the object servers,
as Storlets runs GET storlets (``sandbox_on_object``), unless
``sandboxed_decode_stage = proxy``.

Incompressible bodies: before it sends anything, the proxy lets a filter
that may store a body unchanged look at its first bytes (compression reads
up to four frames, and only while they fail to compress); if every filter
agrees, the body goes out as it came, with its record in the headers, as a
byte-preserving pipeline's does (``filters.base.keep_unchanged``). Proxies before
this one cannot read such objects: ``keep_incompressible = false`` while a
rolling upgrade has old proxies serving reads (docs/deploy.md).

Lifecycle: under ``SET EXPIRY WITH after=...`` every object PUT and POST
gets its ``X-Delete-At`` here (``filters.expiry``); Swift's object-expirer
deletes the object then.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from swift.common.constraints import check_object_creation
from swift.common.request_helpers import (
    update_etag_is_at_header,
    update_ignore_range_header,
)
from swift.common.swob import (
    HTTPException,
    HTTPInternalServerError,
    HTTPServiceUnavailable,
    Request,
    wsgify,
)
from swift.common.utils import config_true_value, get_logger, split_path

from iostack.filters.base import FilterContext, KeyProvider, keep_unchanged
from iostack.filters.builtin import expiry
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.filters.metadata import FilterMetadata, public_params
from iostack.filters.offload import offload_from_conf
from iostack.filters.tenant_keys import KeyFileProvider
from iostack.policy.logs import route_to_swift
from iostack.policy.reader import PolicyReader, PolicyStoreUnavailable
from iostack.policy.resolve import PipelineEntry
from iostack.policy.view import RequestView, view_for
from iostack.stored_object import (
    ETAG_HEADER,
    OBJECT_FILTERS_HEADER,
    OBJECT_LAYER,
    PIPELINE_HEADER,
    SYSMETA_PREFIX,
    TENANT_LAYER,
    AppliedFilter,
)
from iostack.swift_middleware.enforce.decode import decoded_response, is_filtered
from iostack.swift_middleware.enforce.encode import (
    BodyLookahead,
    EncodingInput,
    install_footers,
    install_record,
)
from iostack.swift_middleware.enforce.pins import pin_write_refused
from iostack.swift_middleware.enforce.sandbox_object import STAGES as SANDBOXED_DECODE_STAGES
from iostack.swift_middleware.enforce.sandboxed import SandboxedEncoder
from iostack.swift_middleware.shared_reader import reader_settings, shared_reader


def _carries_no_data(req: Request) -> bool:
    # An SLO manifest's body is the list of its segments (the slo middleware
    # above wrote it), and a DLO manifest usually has none: the segments are
    # the data and are filtered as objects. A DLO manifest that carries a body
    # carries tenant data: it is filtered like any PUT. A symlink (object
    # versioning makes one per version) has no body and its own listing
    # overrides, which a filter record must not replace.
    return (req.headers.get("X-Static-Large-Object", "").lower() == "true"
            or req.params.get("multipart-manifest") == "put"
            or "X-Object-Sysmeta-Symlink-Target" in req.headers
            or ("X-Object-Manifest" in req.headers and req.content_length == 0))


def _creation_error(req: Request, obj: str) -> HTTPException | None:
    """Swift's own checks of a new object (411, 501, 413 ...), made before encoding
    replaces the framing they read: the encoded body is sent chunked, so the proxy
    server would find a length where the client sent none, and no declared size to
    refuse. Swift's proxy guesses a missing Content-Type and stamps the request
    before it checks; so does the copy checked here."""
    probe = Request(dict(req.environ))
    # Swift replaces an absent *or empty* type (swiftclient sends an empty one).
    if not probe.headers.get("Content-Type"):
        probe.headers["Content-Type"] = "application/octet-stream"
    probe.ensure_x_timestamp()
    return check_object_creation(probe, obj)


def _tenant_delete_at(req: Request, now: float) -> float | None:
    """The deletion time the tenant asked for (``X-Delete-At`` or ``-After``); None: none.

    Raises ValueError for a value Swift itself would refuse.
    """
    if req.headers.get("X-Delete-At"):
        return float(int(req.headers["X-Delete-At"]))
    if req.headers.get("X-Delete-After"):
        return now + int(req.headers["X-Delete-After"])
    return None


def _expire(req: Request, pipeline: list[PipelineEntry]) -> None:
    """``SET EXPIRY``: the write gets the policy's ``X-Delete-At`` (``filters.expiry``).

    A tenant's sooner deletion is kept; a malformed one is left for Swift to
    refuse (400), so nothing is stored either way.
    """
    entry = next((e for e in pipeline if e.filter == expiry.METADATA.name), None)
    if entry is None:
        return
    now = time.time()
    try:
        tenant = _tenant_delete_at(req, now)
    except ValueError:
        return
    at = expiry.delete_at(expiry.SPEC.validate(entry.params), now, tenant)
    for name in ("X-Delete-After", "X-Remove-Delete-At"):
        req.headers.pop(name, None)
    req.headers["X-Delete-At"] = str(at)


class IOStackProxyMiddleware:
    def __init__(self, app, conf: dict[str, Any]) -> None:
        self.app = app
        self.reader_settings = reader_settings(conf)
        self.swift_dir = conf.get("swift_dir", "/etc/swift")
        self.logger = get_logger(conf, log_route="iostack")
        route_to_swift(self.logger)
        self._sandbox = None
        self.sandboxed_decode_stage = conf.get("sandboxed_decode_stage", "object")
        if self.sandboxed_decode_stage not in SANDBOXED_DECODE_STAGES:
            raise ValueError(f"sandboxed_decode_stage must be one of {SANDBOXED_DECODE_STAGES}, "
                             f"not {self.sandboxed_decode_stage!r}")
        self.keys: KeyProvider | None = (
            KeyFileProvider(conf["key_file"]) if conf.get("key_file") else None)
        self.offload = offload_from_conf(conf)
        self.keep_incompressible = config_true_value(conf.get("keep_incompressible", "true"))
        self.client_timeout = float(conf.get("client_timeout", 60))

    @property
    def reader(self) -> PolicyReader:
        return shared_reader(self.reader_settings)

    @property
    def sandbox(self):
        """The Storlets runner for sandboxed filters, loaded on first use (it is heavy)."""
        if self._sandbox is None:
            from iostack.storlet_runtime.host.runner import SandboxRunner

            self._sandbox = SandboxRunner(self.swift_dir, self.logger)
        return self._sandbox

    @wsgify
    def __call__(self, req: Request):
        try:
            _version, account, container, obj = split_path(req.path, 4, 4, True)
        except ValueError:
            return self.app
        refused = pin_write_refused(req, container, obj)
        if refused is not None:
            return refused
        context = FilterContext(account=account, container=container, obj=obj, keys=self.keys,
                                offload=self.offload)
        if req.method in ("GET", "HEAD"):
            return self.handle_read(req, context)
        view = view_for(req.environ, self.app)
        if view is None or view.internal:
            return self.app
        if req.method == "PUT" and not _carries_no_data(req):
            return self.handle_put(req, view, context)
        if req.method in ("PUT", "POST"):
            # Nothing to encode, but the write must not proceed on unknown policies.
            try:
                _expire(req, view.resolution(self.reader).pipeline)
            except PolicyStoreUnavailable as exc:
                return self._unavailable(req, view, exc)
        return self.app

    def _unavailable(self, req: Request, view: RequestView, exc: PolicyStoreUnavailable):
        if not view.authorized():
            return self.app  # Swift refuses it (401/403): a lost store is not the answer
        self.logger.error("IOStack: refusing %s %s: %s", req.method, req.path, exc)
        # Storing the object without its policy (say, unencrypted) would break
        # the policy silently; refuse instead, until the store is back.
        return HTTPServiceUnavailable(
            request=req, body=f"IOStack: {exc}; try again later\n",
            content_type="text/plain")

    # -- GET / HEAD ------------------------------------------------------------
    def handle_read(self, req: Request, context: FilterContext):
        # Conditional requests are evaluated on the tenant's ETag, and a filtered
        # object comes back whole so that Range is answered from the decoded view.
        update_etag_is_at_header(req, ETAG_HEADER)
        update_ignore_range_header(req, PIPELINE_HEADER)
        resp = req.get_response(self.app)
        if (not is_filtered(resp, TENANT_LAYER)
                or resp.status_int >= 300 and resp.status_int not in (304, 412)):
            return resp
        return decoded_response(self.app, req, resp, context, TENANT_LAYER,
                                lower_etag_at=OBJECT_LAYER.etag_header,
                                sandbox=self._sandbox_if_needed(resp),
                                sandbox_on_object=self.sandboxed_decode_stage == "object")

    def _sandbox_if_needed(self, resp):
        return self.sandbox if '"iostack.runtime":"storlet"' in resp.headers.get(
            PIPELINE_HEADER, "") else None

    # -- PUT -------------------------------------------------------------------
    def handle_put(self, req: Request, view: RequestView, context: FilterContext):
        # Only middleware below the gatekeeper (copy) can send these: they describe
        # another object's stored form, never this body.
        for name in [h for h in req.headers if h.title().startswith(SYSMETA_PREFIX)]:
            del req.headers[name]
        if req.environ.get("swift.source") == "OV" and req.content_length == 0:
            # Object versioning moves the client's body into the versions
            # container but copies the emptied request's Content-Length: 0 over
            # it; like Swift's proxy, read that body to its end.
            del req.headers["Content-Length"]
            req.headers["Transfer-Encoding"] = "chunked"
        try:
            resolution = view.resolution(self.reader)
        except PolicyStoreUnavailable as exc:
            return self._unavailable(req, view, exc)
        _expire(req, resolution.pipeline)
        try:
            encoders, object_filters, changing = self._encoders(
                req, resolution.pipeline, view.lookup(self.reader)[1], context)
        except HTTPException as error:
            return error
        if object_filters:
            req.headers[OBJECT_FILTERS_HEADER] = json.dumps(object_filters)
        if not encoders:
            return self.app
        if not changing:
            return self._put_preserved(req, encoders)
        if not view.authorized():
            return self.app  # Swift refuses it (401/403) before reading a byte
        error = _creation_error(req, view.obj)
        if error is not None:
            return error
        if self.keep_incompressible:
            body = BodyLookahead(req, self.client_timeout)
            req.environ["wsgi.input"] = body
            try:
                if keep_unchanged(changing, body.chunks):
                    return self._put_preserved(req, encoders)
            except HTTPException as error:
                return error
        return self._put_encoded(req, encoders)

    def _put_preserved(self, req: Request, encoders: list) -> Any:
        # The stored bytes are the tenant's: Swift's own checks and ETag stand.
        install_record(req, encoders)
        req.environ["wsgi.input"] = EncodingInput(req, encoders, hash_body=False)
        return req.get_response(self.app)

    def _put_encoded(self, req: Request, encoders: list) -> Any:
        client_etag = req.headers.pop("Etag", None)
        body = EncodingInput(req, encoders)
        req.environ["wsgi.input"] = body
        # The stored length is known only at the end: send it chunked.
        req.headers.pop("Content-Length", None)
        req.headers["Transfer-Encoding"] = "chunked"
        install_footers(req, body, client_etag)
        resp = req.get_response(self.app)
        if resp.is_success and body.done:
            resp.headers["Etag"] = body.md5.hexdigest()  # unquoted, as Swift sends it
        return resp

    def _encoders(self, req: Request, pipeline: list[PipelineEntry],
                  filters: Mapping[str, FilterMetadata], context: FilterContext):
        encoders, object_filters = [], []
        changing = []  # the encoders that do not pass every body through unchanged
        for entry in pipeline:
            if entry.sandboxed:
                meta = filters[entry.filter]
                encoder = SandboxedEncoder(self.sandbox, meta, entry.params, context)
                encoders.append((AppliedFilter(entry.filter, public_params(meta, entry.params),
                                               {}), encoder))
                changing.append(encoder)
                continue
            try:
                spec = get_filter(entry.filter)
                if not spec.transforms_body:
                    continue
                # Checked once, here: the encoder and the record take the typed result.
                params = spec.validate(entry.params)
                if entry.stage == "object":
                    # Run by the object servers' middleware, which takes them as sent.
                    object_filters.append({"name": spec.name, "params": params})
                    continue
                encoder = spec.encoder(params, context, validated=True)
            except FilterError as exc:
                raise HTTPInternalServerError(
                    request=req, body=f"IOStack: policy filter {entry.filter}: {exc}",
                    content_type="text/plain") from None
            encoders.append((AppliedFilter(spec.name, public_params(spec.metadata, params), {}),
                             encoder))
            if not spec.preserves_bytes:
                changing.append(encoder)
        return encoders, object_filters, changing


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return IOStackProxyMiddleware(app, conf)

    return factory
