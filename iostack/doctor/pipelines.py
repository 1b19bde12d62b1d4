"""Proxy and object-server configs: IOStack's middlewares present, in place, configured.

A config (a file, or a ``.conf.d`` directory) is loaded with Swift's own
paste loader (``swift.common.wsgi.loadcontext``, which also reads config
directories), without building the servers. The proxy's pipeline is then
completed as Swift's proxy completes it when it starts
(``Application.modify_wsgi_pipeline``: ``catch_errors``, ``gatekeeper``,
``listing_formats``, ``copy``, ``dlo`` and ``versioned_writes`` are added
where missing), so the order checked is the order that runs.

Middlewares are recognised by what they load, not by their section names:
IOStack's by their module (``egg:iostack#iostack_proxy`` or a
``paste.filter_factory`` line naming the module), Swift's by their entry
point. The order rules (``PROXY_ORDER``, ``OBJECT_ORDER``) say why each
position matters; ``docs/deploy.md`` explains them at length.

IOStack's own config parsing is the judge of its keys: each of its
middlewares is built once on a stand-in app (no connection is made, no
thread started: those happen in the server's workers), and what it refuses
is reported as it says it. Keys that have a default but must not keep it
(``redis_url``, ``amqp_url``) are checked here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import SimpleNamespace
from typing import Any

from paste.deploy import loadwsgi
from swift.common.utils import config_true_value, list_from_csv, search_tree
from swift.common.wsgi import PipelineWrapper, loadcontext

from iostack.doctor import Finding, error, ok, warning
from iostack.monitoring.bus import source_id
from iostack.service_probes import redact
from iostack.swift_middleware.shared_reader import reader_settings


def _iostack_modules() -> dict[str, str]:
    """IOStack's middlewares by the module of their filter_factory, from the installed
    paste entry points (a config may name the factory, ``paste.filter_factory = m:f``)."""
    return {ep.value.split(":", 1)[0]: ep.name
            for ep in entry_points(group="paste.filter_factory")
            if ep.dist is not None and ep.dist.name == "iostack"}


IOSTACK_MODULES = _iostack_modules()
READERS = ("iostack_proxy", "iostack_qos", "iostack_select", "iostack_cache")  # read policies
PUBLISHERS = ("iostack_metrics", "iostack_qos")  # talk to RabbitMQ
PROXY_IOSTACK = ("iostack_metrics", "iostack_qos", "iostack_select", "iostack_proxy",
                 "iostack_cache")
AUTH = ("tempauth", "keystoneauth")
# Swift middlewares that read or write through sub-requests IOStack must filter.
SUBREQUESTS = ("copy", "slo", "dlo", "versioned_writes", "symlink", "bulk", "formpost")
# Those of them below auth in Swift's pipeline (bulk and formpost sit above it).
AFTER_AUTH_SUBREQUESTS = SUBREQUESTS[:5]
SWIFT_ENCRYPTION = ("keymaster", "kms_keymaster", "kmip_keymaster", "encryption")

# (what must be above, what must be below, why): the proxy pipeline.
PROXY_ORDER: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("gatekeeper",), PROXY_IOSTACK,
     "the gatekeeper strips X-Backend-* headers from clients, and IOStack hands "
     "object-stage filters down in X-Backend-Iostack-Object-Filters, which a client "
     "must not be able to forge"),
    (AUTH, PROXY_IOSTACK,
     "IOStack acts only for requests Swift's auth authorizes, on the account it proved "
     "(metering, QoS and selection must not run for refused requests)"),
    (("s3api",), ("iostack_proxy", "iostack_cache"),
     "S3 multipart parts and copies are s3api's sub-requests: they must be filtered "
     "under the bucket's policies"),
    (("iostack_metrics",), ("iostack_qos", "iostack_select", "storlet_handler",
                            "iostack_proxy", "iostack_cache", *AFTER_AUTH_SUBREQUESTS),
     "the metric middleware counts what tenants asked for, once per request (not the "
     "sub-requests of copy, SLO, DLO), and builds the request view the IOStack "
     "middlewares below it share"),
    (("iostack_qos",), ("iostack_select", "iostack_proxy", "iostack_cache",
                      *AFTER_AUTH_SUBREQUESTS),
     "bandwidth SLOs shape each client request once (not its sub-requests), after "
     "record selection cut answers down to what was asked"),
    (("iostack_select",), ("iostack_proxy", "iostack_cache", *AFTER_AUTH_SUBREQUESTS),
     "record selection runs on whole large objects (above slo and dlo) and on what the "
     "iostack middleware below it decoded"),
    (("storlet_handler",), ("copy", "slo", "dlo"),
     "Storlets handles copies and large objects itself (Storlets' own rule)"),
    (SUBREQUESTS, ("iostack_proxy", "iostack_cache"),
     "copies, large-object segments, archived versions, extracted archives and form "
     "uploads are sub-requests of these middlewares, and must be encoded and decoded too"),
    (("iostack_proxy",), ("iostack_cache",),
     "the proxy cache keeps objects as stored (encoded): no plaintext of an encrypted "
     "object reaches the proxy's disk, and iostack decodes cache hits"),
    (("iostack_proxy", "iostack_cache"), SWIFT_ENCRYPTION,
     "Swift's at-rest encryption must get the bytes IOStack stores (compress, then "
     "encrypt); above IOStack it hands IOStack ciphertext, which no filter can shrink"),
]
# The object-server pipeline.
OBJECT_ORDER: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("iostack_metrics",), ("iostack_select_object", "storlet_handler", "iostack_object"),
     "object-stage metrics count what the object server served, before selection and "
     "sandboxed filters change the answer"),
    (("iostack_select_object",), ("storlet_handler", "iostack_object"),
     "record selection on object servers reads the object as its tenant stored it, "
     "decoded by storlet_handler and iostack below it"),
    (("storlet_handler",), ("iostack_object",),
     "Storlets must get what the proxy layer stored, with object-stage filters undone "
     "by iostack below it"),
]

ADD = "see docs/deploy.md for the section to add"
# role -> (level, what happens without it, where to add it)
PROXY_NEEDED = {
    "iostack_proxy": ("error", "policies are not enforced by this proxy: tenants' writes are "
                      "stored unfiltered and filtered objects read back encoded",
                      "add a filter with use = egg:iostack#iostack_proxy right before "
                      "proxy-logging proxy-server (below copy, slo, dlo, versioned_writes, "
                      "symlink)"),
    "iostack_metrics": ("warning", "this proxy publishes no metrics: dynamic (WHEN) "
                        "policies and bandwidth SLOs do not see its load",
                        "add egg:iostack#iostack_metrics right after the auth middleware"),
    "iostack_qos": ("warning", "bandwidth SLOs (SET BANDWIDTH) are not enforced by this proxy",
                    "add egg:iostack#iostack_qos right after iostack_metrics"),
    "iostack_select": ("warning", "record selection (csv_select, grep, X-Iostack-Filter) "
                       "does not run: GETs return whole objects",
                       "add egg:iostack#iostack_select right after iostack_qos"),
    "iostack_cache": ("warning", "SET CACHING policies do nothing on this proxy",
                      "add egg:iostack#iostack_cache right below iostack"),
}
OBJECT_NEEDED = {
    "iostack_object": ("error", "filters staged ON OBJECT are not run: proxies send them "
                       "down and the object is stored unfiltered, and objects written with "
                       "them read back encoded",
                       "add a filter with use = egg:iostack#iostack_object right before "
                       "object-server"),
    "iostack_select_object": ("error", "proxies ask object servers to select records "
                              "(iostack_select's object_stage, true by default), and this "
                              "one would answer with the whole object",
                              "add egg:iostack#iostack_select_object after iostack_metrics, "
                              "or set object_stage = false in the proxies' iostack_select"),
    "iostack_metrics": ("warning", "this object server publishes no object-stage metrics",
                        "add egg:iostack#iostack_metrics with stage = object in front of "
                        "the other IOStack middlewares"),
    "storlet_handler": ("warning", "sandboxed filters cannot be undone here: proxies decode "
                        "them after fetching the stored bytes",
                        "add Storlets' storlet_handler (execution_server = object) above "
                        "iostack (docs/storlets.md)"),
}


class StandInApp:
    """The app an IOStack middleware is built on to check its config; never called."""

    def __call__(self, env: dict[str, Any], start_response: Any) -> Any:
        raise AssertionError("the doctor never serves requests")


@dataclass
class Stage:
    section: str  # the config's name for it ("iostack", "proxy-logging")
    role: str  # what it is ("iostack_proxy", "proxy_logging")
    conf: dict[str, Any]
    context: Any = None  # paste's loader context (None when Swift added it)


@dataclass
class Pipeline:
    path: str
    kind: str  # "proxy" or "object"
    stages: list[Stage]
    app_conf: dict[str, Any]
    added: list[str] = field(default_factory=list)  # filters Swift's proxy adds at start

    def roles(self) -> list[str]:
        return [s.role for s in self.stages]

    def find(self, role: str) -> Stage | None:
        return next((s for s in self.stages if s.role == role), None)

    def where(self, section: str = "pipeline:main") -> str:
        return f"{self.path} [{section}]"


class ConfigLoadError(Exception):
    """A config could not be loaded; the message says why."""


def find_configs(swift_dir: str, kind: str) -> list[str]:
    """The configs swift-init would use for a server kind: files and ``.conf.d`` dirs."""
    return search_tree(swift_dir, f"{kind}-server*", ".conf", dir_ext=".conf.d")


def _role(context: Any) -> str:
    module = getattr(context.object, "__module__", "") or ""
    if module in IOSTACK_MODULES:
        return IOSTACK_MODULES[module]
    return context.entry_point_name or module.rsplit(".", 1)[-1]


def _complete_proxy_pipeline(context: Any) -> list[str]:
    """Add what Swift's proxy adds when it starts; the names of the filters it added."""
    from swift.proxy.server import Application

    before = {id(c) for c in context.filter_contexts}
    # The method only logs through self.logger: Swift's own rule, without building the proxy.
    holder = SimpleNamespace(logger=SimpleNamespace(info=lambda *a, **k: None,
                                                    debug=lambda *a, **k: None))
    Application.modify_wsgi_pipeline(holder, PipelineWrapper(context))
    return [c.name for c in context.filter_contexts if id(c) not in before]


def load(path: str, kind: str) -> Pipeline:
    """The pipeline of a ``kind`` ("proxy", "object") server config, as the server runs it."""
    if not os.path.exists(path):
        raise ConfigLoadError(f"{path} does not exist")
    try:
        context = loadcontext(loadwsgi.APP, path)
    except (LookupError, ImportError, ValueError, OSError) as exc:
        raise ConfigLoadError(f"Swift cannot load {path}: {exc}") from None
    if context.object_type.name != "pipeline":
        raise ConfigLoadError(f"{path} has no [pipeline:main]: IOStack needs a pipeline")
    app = _role(context.app_context)
    if app != kind:
        raise ConfigLoadError(f"{path} runs egg:swift#{app}, not the {kind} server")
    added = _complete_proxy_pipeline(context) if kind == "proxy" else []
    stages = [Stage(c.name, _role(c), dict(c.config()), c) for c in context.filter_contexts]
    return Pipeline(path, kind, stages, dict(context.app_context.config()), added)


# -- checks of one pipeline -----------------------------------------------------------


def _order(pipeline: Pipeline, rules) -> list[Finding]:
    findings = []
    index = {}
    for i, stage in enumerate(pipeline.stages):
        index.setdefault(stage.role, i)
    for uppers, lowers, why in rules:
        for lower in lowers:
            if lower not in index:
                continue
            below = [u for u in uppers if u in index and index[u] > index[lower]]
            if below:
                names = ", ".join(pipeline.stages[index[u]].section for u in below)
                section = pipeline.stages[index[lower]].section
                findings.append(error(
                    pipeline.where(), f"{section} sits above {names}: {why}",
                    f"move {section} below {names} in the pipeline"))
    return findings


def _presence(pipeline: Pipeline, needed: dict[str, tuple[str, str, str]]) -> list[Finding]:
    findings = []
    roles = pipeline.roles()
    for role, (level, consequence, fix) in needed.items():
        if role not in roles:
            make = error if level == "error" else warning
            findings.append(make(pipeline.where(), f"no {role} middleware: {consequence}", fix))
    return findings


def _built(pipeline: Pipeline) -> list[Finding]:
    """Each IOStack middleware built on a stand-in app: its own config checks."""
    findings = []
    for stage in pipeline.stages:
        if not stage.role.startswith("iostack") or stage.context is None:
            continue
        try:
            stage.context.create()(StandInApp())
        except Exception as exc:  # noqa: BLE001 - whatever it refuses, the server would too
            findings.append(error(pipeline.where(f"filter:{stage.section}"),
                                  f"the {stage.role} middleware refuses its config: {exc}",
                                  "fix the value it names (docs/deploy.md lists every key)"))
    return findings


def _keys(pipeline: Pipeline) -> list[Finding]:
    findings = []
    for stage in pipeline.stages:
        where = pipeline.where(f"filter:{stage.section}")
        if stage.role in READERS and "redis_url" not in stage.conf:
            findings.append(error(
                where, "redis_url is not set: the middleware would read policies from "
                       "redis://127.0.0.1:6379/0, without a password",
                "set redis_url = redis://:PASSWORD@HOST:PORT/DB, the controller's Redis"))
        if stage.role in PUBLISHERS and "amqp_url" not in stage.conf:
            findings.append(error(
                where, "amqp_url is not set: the middleware would use RabbitMQ's guest "
                       "account on 127.0.0.1",
                "set amqp_url = amqp://USER:PASSWORD@HOST:5672/VHOST, the controller's"))
        if stage.role == "iostack_proxy" and not stage.conf.get("key_file"):
            findings.append(warning(
                where, "no key_file: PUTs under an ENCRYPTION policy fail (500)",
                "set key_file to the root secret shared by every proxy (0600, made by "
                "iostack.filters.tenant_keys.create_key_file)"))
        if stage.role == "iostack_metrics" and stage.conf.get("stage", "proxy") != pipeline.kind:
            other = "object servers'" if pipeline.kind == "proxy" else "proxies'"
            findings.append(error(
                where, f"stage = {stage.conf.get('stage', 'proxy')} in the {pipeline.kind} "
                       f"server's pipeline: its metrics would count as the {other}",
                f"set stage = {pipeline.kind}"))
        if stage.role == "storlet_handler":
            findings += _storlets(pipeline, stage)
    return findings


def _storlets(pipeline: Pipeline, stage: Stage) -> list[Finding]:
    findings = []
    where = pipeline.where(f"filter:{stage.section}")
    gateway = stage.conf.get("storlet_gateway_conf")
    if gateway and not os.path.isfile(gateway):
        findings.append(error(where, f"storlet_gateway_conf {gateway} does not exist",
                              "write it (docs/storlets.md) or fix the path"))
    auth = next((s for s in pipeline.stages if s.role in AUTH), None)
    if auth is not None:
        ours = _reseller_prefix(stage.conf.get("reseller_prefix", "AUTH"))
        theirs = _reseller_prefix(list_from_csv(auth.conf.get("reseller_prefix", "AUTH"))[0])
        if ours != theirs:
            findings.append(error(
                where, f"reseller_prefix {ours} differs from {auth.section}'s {theirs}: "
                       "Storlets would not recognise tenants' accounts",
                f"set reseller_prefix = {theirs}"))
    return findings


def _reseller_prefix(value: str) -> str:
    return value.strip().rstrip("_")


def _store(stage: Stage) -> tuple[str, str]:
    settings = reader_settings(stage.conf)
    return settings["redis_url"], settings["prefix"]


def check(pipeline: Pipeline, proxies_select_on_object: bool = True) -> list[Finding]:
    """Findings for one loaded pipeline."""
    findings = []
    for name in pipeline.added:
        findings.append(warning(
            pipeline.where(), f"{name} is not listed: Swift's proxy adds it when it starts, "
                              "where it chooses",
            f"list {name} in the pipeline explicitly, so the order you read is the one "
            "that runs"))
    if pipeline.kind == "proxy":
        roles = pipeline.roles()
        if "iostack_cache" in roles and any(role in SWIFT_ENCRYPTION for role in roles):
            findings.append(warning(
                pipeline.where(), "the proxy cache sits above Swift's encryption: it keeps "
                                  "objects as IOStack stored them, not encrypted by Swift",
                "put iostack_cache's cache_dir on an encrypted volume, or use IOStack's "
                "encryption filter for cached containers"))
        if not any(role in AUTH for role in roles):
            findings.append(error(
                pipeline.where(), "no auth middleware (tempauth or keystoneauth): IOStack "
                                  "acts only for requests Swift's auth authorizes",
                "add your auth middleware above the IOStack middlewares"))
        findings += _presence(pipeline, PROXY_NEEDED)
        findings += _order(pipeline, PROXY_ORDER)
    else:
        needed = dict(OBJECT_NEEDED)
        if not proxies_select_on_object:
            del needed["iostack_select_object"]
        findings += _presence(pipeline, needed)
        findings += _order(pipeline, OBJECT_ORDER)
    findings += _keys(pipeline)
    findings += _built(pipeline)
    if not any(f.level == "error" for f in findings):
        findings.append(ok(pipeline.where(), "IOStack middlewares present, in order and "
                                             "configured: " + " ".join(
                                                 s.section for s in pipeline.stages
                                                 if s.role.startswith("iostack"))))
    return findings


# -- what several configs must agree on ------------------------------------------------


def select_on_object(proxies: list[Pipeline]) -> bool:
    """Whether any proxy asks object servers to select records (object_stage)."""
    return not proxies or any(
        config_true_value(s.conf.get("object_stage", "true"))
        for p in proxies for s in p.stages if s.role == "iostack_select")


def check_together(proxies: list[Pipeline], objects: list[Pipeline]) -> list[Finding]:
    """What the proxies and object servers must agree on: policy store, namespace, chunks."""
    findings = []
    stores = {_store(s) for p in proxies for s in p.stages if s.role in READERS}
    if len(stores) > 1:
        findings.append(error(
            "proxies", "IOStack middlewares read different policy stores: "
                       + "; ".join(f"{redact(u)} prefix {p}" for u, p in sorted(stores)),
            "give every IOStack middleware of every proxy the controller's redis_url and "
            "key_prefix"))
    namespaces = {(p.path, s.section): s.conf.get("namespace", "iostack")
                  for p in proxies + objects for s in p.stages if s.role in PUBLISHERS}
    if len(set(namespaces.values())) > 1:
        findings.append(error(
            "proxies and object servers",
            "metrics and QoS use different namespaces: "
            + "; ".join(f"{path} [filter:{section}] {ns}"
                        for (path, section), ns in sorted(namespaces.items())),
            "set the controller's namespace in every iostack_metrics and iostack_qos"))
    chunk = max((int(p.app_conf.get("object_chunk_size", 65536)) for p in proxies), default=0)
    for pipeline in objects:
        stage = pipeline.find("iostack_select_object")
        if stage and int(stage.conf.get("padding", 65536)) < chunk:
            findings.append(error(
                pipeline.where(f"filter:{stage.section}"),
                f"padding {stage.conf.get('padding', 65536)} is below the proxies' "
                f"object_chunk_size {chunk}: a selection that finds little stalls the "
                "proxy's read until it times out",
                f"set padding = {chunk} or more"))
    return findings


@dataclass(frozen=True)
class ServiceUse:
    """A service URL the configs name, and where."""

    url: str
    where: tuple[str, ...]
    key_prefix: str = ""  # Redis: the policy store's prefix


def services(pipelines: list[Pipeline]) -> tuple[list[ServiceUse], list[ServiceUse]]:
    """The Redis stores (URL, prefix) and RabbitMQ URLs the configs name."""
    stores: dict[tuple[str, str], list[str]] = {}
    brokers: dict[str, list[str]] = {}
    for pipeline in pipelines:
        for stage in pipeline.stages:
            where = pipeline.where(f"filter:{stage.section}")
            if stage.role in READERS and "redis_url" in stage.conf:
                stores.setdefault(_store(stage), []).append(where)
            if stage.role in PUBLISHERS and "amqp_url" in stage.conf:
                brokers.setdefault(stage.conf["amqp_url"], []).append(where)
    return ([ServiceUse(url, tuple(w), prefix) for (url, prefix), w in stores.items()],
            [ServiceUse(url, tuple(w)) for url, w in brokers.items()])


def metric_sources(proxies: list[Pipeline]) -> dict[str, str]:
    """Per proxy config, the prefix of its workers' metric source ids."""
    sources = {}
    for pipeline in proxies:
        stage = pipeline.find("iostack_metrics")
        if stage is not None:
            sources[pipeline.path] = source_id("proxy", stage.conf).rsplit("-", 1)[0] + "-"
    return sources
