"""The all-in-one stack: Swift, memcached, Redis, RabbitMQ and the controller on one host.

``AllInOne(config).start()`` brings every component up (those already
running are kept); with ``config.nodes`` above 1 Swift is a cluster of
storage nodes in network namespaces (``iostack.aio.cluster``), and ``stop``
also removes the namespaces and interfaces it created. It waits until each
answers, checks that a tenant can authenticate, and writes ``aio.json``
describing the stack. ``stop()`` stops exactly the processes recorded in the
state dir's pid files; ``status()`` reports each one. Start-up that fails
stops what it started and raises ``AioError`` naming the component and its
log file. ``warnings()`` lists what the operator should not ignore (an
unauthenticated Redis or RabbitMQ used on request).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from configparser import ConfigParser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from iostack import __version__
from iostack.aio import devices, keystone
from iostack.aio import secrets as aio_secrets
from iostack.aio.cluster import Cluster, cluster_process_names, node_name, reachable_from_nodes
from iostack.aio.config import AioConfig
from iostack.aio.keystone import KeystoneError, KeystoneServer, TenantIdentity, default_venv
from iostack.aio.netns import ClusterNetwork, NetworkError, NetworkPlan, namespaces
from iostack.aio.podman_engine import PodmanEngine
from iostack.aio.processes import ProcessManager
from iostack.aio.services import (
    PRIVATE_SERVERS,
    ServiceError,
    ServiceInfo,
    Services,
    host_port,
    redact,
)
from iostack.aio.swift import (
    DAEMONS,
    RESELLER_PREFIX,
    SERVERS,
    SwiftLayout,
    tenant_account,
    tenant_user,
)
from iostack.endpoints import AIO_INFO_FILE
from iostack.policy.connection import connect
from iostack.ports import NoFreePortError, port_open, wait_until
from iostack.private_files import write_private_json
from iostack.storlet_runtime.host.cgroups import CGROUP_FS
from iostack.storlet_runtime.host.swift_conf import gateway_conf_path
from iostack.storlet_runtime.tools.engine_image import ImageError

CONTROLLER = "controller"
KEYSTONE = "keystone"
ENGINE = "container-engine"  # the Podman service of --sandbox docker
BLOCK_BRIDGE = "block-bridge"
BLOCK_INITIATOR = "iqn.2026-11.org.iostack:aio-initiator"  # the ACL's name; CHAP is the secret
# Stop order: clients of a service before the service.
STOP_ORDER = (BLOCK_BRIDGE, CONTROLLER, "proxy", "proxy2", *DAEMONS, "object", "container",
              "account", KEYSTONE)
DEMO_VOLUME = {"name": "demo", "size": 64 << 20, "filters": "xor(key=0x5a)>bitrev"}


class AioError(RuntimeError):
    """The all-in-one could not be started; the message says which part and where its log is."""


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    running: bool
    pid: int | None
    detail: str


def _http_ok(url: str, headers: dict[str, str] | None = None) -> bool:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 - our own loopback URL
    try:
        with urllib.request.urlopen(request, timeout=2) as response:  # noqa: S310 - loopback URL
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError):
        return False


class AllInOne:
    """One all-in-one stack, identified by its state dir."""

    def __init__(self, config: AioConfig) -> None:
        self.config = config
        self.state_dir = config.state_dir
        self.processes = ProcessManager(self.state_dir)
        self.services = Services(self.state_dir, self.processes, config.start_timeout,
                                 config.ports())
        self.info_path = self.state_dir / AIO_INFO_FILE
        self.network = ClusterNetwork(self.state_dir, config.nodes)
        self.engine = PodmanEngine(self.state_dir / "engine")

    # -- start -----------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        # Not 0700: the sandbox user must reach the storlet directories under it
        # (bwrap binds with that user's rights). What is private has a 0700 parent.
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.config.save()
        secrets = aio_secrets.load_or_create(self.state_dir)
        already = set(self.processes.names())
        network_was_there = self.network.exists()
        devices_dir = self.state_dir / "srv" / "node"
        mounted_before = devices.mounted(devices_dir)
        try:
            return self._start(secrets)
        except (AioError, ServiceError, NoFreePortError, NetworkError, KeystoneError,
                ValueError) as exc:
            for name in self.processes.names():
                if name not in already:
                    self.processes.stop(name)
            if not network_was_there:
                self.network.destroy()
            devices.unmount_all(devices_dir, keep=mounted_before)  # what this start mounted
            raise AioError(str(exc)) from None

    def _start(self, secrets: dict[str, str]) -> dict[str, Any]:
        cfg = self.config
        allow = cfg.allow_unauthenticated_services
        if cfg.cluster:
            # Before the services: private ones also listen on the root's bridge address.
            self.services.listen_also = (self.network.ensure().gateway,)
        # A cluster's private Redis fails over: replicas under Sentinel.
        self.services.redis_sentinel = cfg.cluster
        memcache = self.services.ensure("memcached", cfg.memcache_url)
        redis = self.services.ensure("redis", cfg.redis_url, allow)
        # The broker boots (seconds) while Swift does; the proxies' metric publisher
        # and QoS consumer connect when it answers.
        amqp = self.services.ensure("rabbitmq", cfg.amqp_url, allow, wait=False)

        keystone_server = self._start_keystone(secrets) if cfg.auth == "keystone" else None
        layout = self._swift_layout(secrets)
        if cfg.sandbox == "docker":
            layout.storlet_engine = self._start_engine()
        layout.prepare()
        processes = layout.processes()
        for proc in processes:
            self._start_process(proc.name, proc.argv, proc.address)
        for proc in processes:
            if proc.address:
                self._wait_for(proc.name, lambda a=proc.address: port_open(*a),
                               f"port {proc.address[1]}")
        for server, url in zip(layout.proxies, cfg.proxy_urls, strict=True):
            self._wait_for(server, lambda url=url: _http_ok(f"{url}/healthcheck"), "healthcheck")
        self.services.wait_started()  # the controller consumes metrics from the start
        identities = self._provision_keystone(keystone_server, secrets) if keystone_server else []

        controller_url = f"http://{cfg.host}:{cfg.controller_port}"
        controller_conf = self.state_dir / "etc" / "controller.json"
        write_private_json(controller_conf, {
            "host": cfg.host,
            "port": cfg.controller_port,
            "redis_url": redis.url,
            "amqp_url": amqp.url,
            "admin_token": secrets["controller_token"],
            "state_dir": str(self.state_dir),
            "key_prefix": cfg.key_prefix,
            "namespace": cfg.namespace,
            "actor_hold_seconds": cfg.actor_hold,
            "qos_capacity_get": cfg.qos_capacity_get,
            "qos_capacity_put": cfg.qos_capacity_put,
            # Lets tenants read their own policies with their Swift token.
            "swift_url": cfg.proxy_url,
            # /v1/simulate runs `policy simulate`, which reads the stored objects from Swift.
            "swift_dir": str(layout.swift_dir),
            # The console's Block page lists the bridge's volumes and storage groups.
            "block_bridge": {
                "url": f"http://{cfg.host}:{cfg.block_port}/targetrpc", "user": "admin",
                "password": aio_secrets.generated_secret(self.state_dir, "block_bridge_password"),
            },
            "tenants": ({i.tenant: f"{RESELLER_PREFIX}{i.project_id}" for i in identities}
                        if keystone_server else list(aio_secrets.TENANTS)),
            **(self._controller_keystone(keystone_server, secrets) if keystone_server else {}),
        })
        self._start_process(
            CONTROLLER,
            [sys.executable, "-m", "iostack.controller.server", "--config", str(controller_conf)],
            (cfg.host, cfg.controller_port),
        )
        self._wait_for(
            CONTROLLER, lambda: _http_ok(f"{controller_url}/v1/health"), "health check"
        )

        block = self._start_block_bridge(controller_url, secrets["controller_token"])

        info = self._describe(secrets, redis.url, amqp.url, memcache.url, controller_url)
        if keystone_server:
            self._describe_keystone(info, keystone_server, identities)
        info["swift_dir"] = str(layout.swift_dir)
        if isinstance(layout, Cluster):
            info["nodes"] = layout.describe()
            info["cluster_network"] = {"subnet": layout.plan.subnet,
                                       "gateway": layout.plan.gateway,
                                       "root_interface": layout.plan.root_if,
                                       "namespaces": layout.plan.namespaces}
        info["block_bridge"] = block
        info["warnings"] = self.services.warnings() + layout.warnings
        info["device_fs"] = layout.device_fs
        info["version"] = __version__  # the release that started it (``aio status`` shows it)
        user = info["tenants"]["t1"]
        if keystone_server:
            token = keystone_token(user)
            self._wait_for("proxy", lambda: _http_ok(user["storage_url"], {"X-Auth-Token": token}),
                           "tenant authentication (Keystone token)")
        else:
            self._wait_for(
                "proxy",
                lambda: _http_ok(info["auth_url"], {"X-Auth-User": user["user"],
                                                    "X-Auth-Key": user["key"]}),
                "tenant authentication",
            )
        write_private_json(self.info_path, info)
        return info

    # -- the container engine (sandbox = docker) ---------------------------------
    def _start_engine(self) -> dict[str, str]:
        """Start the stack's Podman service and build the storlet image if its inputs changed;
        the gateway config keys that lead the docker gateway there."""
        engine = self.engine
        if not Path(engine.podman).exists():
            raise AioError(f"{ENGINE}: {engine.podman} is missing (apt-get install podman runc; "
                           "make setup installs them)")
        engine.prepare()
        self._start_process(ENGINE, engine.service_argv(), None, {**os.environ, **engine.env})
        self._wait_for(ENGINE, engine.answers, f"Docker API on {engine.socket_path}")
        try:
            image = engine.ensure_image()
        except ImageError as exc:
            raise AioError(f"{ENGINE}: {exc}") from None
        return {"docker_url": engine.url, "default_container_image_name": image}

    # -- Keystone (auth = keystone) ----------------------------------------------
    def _keystone(self, secrets: dict[str, str]) -> KeystoneServer:
        cfg = self.config
        venv = Path(cfg.keystone_venv) if cfg.keystone_venv else default_venv(self.state_dir)
        return KeystoneServer(self.state_dir, venv, cfg.host, cfg.keystone_port,
                              secrets["keystone_admin_password"])

    def _start_keystone(self, secrets: dict[str, str]) -> KeystoneServer:
        """Set Keystone up and start it; it boots while Swift does."""
        server = self._keystone(secrets)
        if self.processes.find(KEYSTONE) is None:
            server.prepare()
        self._start_process(KEYSTONE, server.argv(), (server.host, server.port), server.env)
        return server

    def _provision_keystone(self, server: KeystoneServer,
                            secrets: dict[str, str]) -> list[TenantIdentity]:
        self._wait_for(KEYSTONE, lambda: _http_ok(server.url), "identity API (/v3)")
        tenants = {tenant: {"password": secrets[f"{tenant}_key"],
                            "ec2_access": secrets[f"{tenant}_ec2_access"],
                            "ec2_secret": secrets[f"{tenant}_ec2_secret"]}
                   for tenant in aio_secrets.TENANTS}
        return server.provision(secrets["keystone_service_password"], self.config.proxy_url,
                                tenants)

    def _controller_keystone(self, server: KeystoneServer,
                             secrets: dict[str, str]) -> dict[str, Any]:
        """The controller validates Keystone tokens as the ``iostack`` service user; an
        administrator has the ``admin`` role in the ``admin`` project."""
        return {
            "keystone": {
                "auth_url": server.url, "username": keystone.SERVICE_USER,
                "password": secrets["keystone_service_password"],
                "project_name": keystone.SERVICE_PROJECT,
                "user_domain_name": keystone.DOMAIN, "project_domain_name": keystone.DOMAIN,
                "admin_roles": ["admin"], "admin_project_name": keystone.ADMIN_PROJECT,
            },
            "auth_cache_seconds": self.config.token_cache_seconds,
        }

    def _describe_keystone(self, info: dict[str, Any], server: KeystoneServer,
                           identities: list[TenantIdentity]) -> None:
        """``aio.json`` for a Keystone stack: each tenant's ``os_*`` settings and EC2 pair."""
        info.update(auth="keystone", auth_url=server.url, auth_version="3",
                    keystone_url=server.url)
        info["admin"] = {"user": keystone.ADMIN_USER, "key": server.admin_password,
                         "os_auth_url": server.url, "os_username": keystone.ADMIN_USER,
                         "os_password": server.admin_password,
                         "os_project_name": keystone.ADMIN_PROJECT,
                         "os_user_domain_name": keystone.DOMAIN,
                         "os_project_domain_name": keystone.DOMAIN}
        for identity in identities:
            account = f"{RESELLER_PREFIX}{identity.project_id}"
            info["tenants"][identity.tenant] = {
                **server.client_settings(identity),
                "account": account, "user": identity.username, "key": identity.password,
                "storage_url": f"{self.config.proxy_url}/v1/{account}",
                "s3_access_key": identity.ec2_access, "s3_secret_key": identity.ec2_secret,
            }

    def _swift_layout(self, secrets: dict[str, str]) -> SwiftLayout | Cluster:
        """The stack's Swift, once its services are known (``services.info``)."""
        cfg = self.config
        urls = {name: self.services.info[name] for name in ("memcached", "redis", "rabbitmq")}
        if not cfg.cluster:
            return SwiftLayout(cfg, secrets, urls["memcached"].url, urls["redis"].url,
                               urls["rabbitmq"].url)
        plan = self.network.plan
        if plan is None:
            raise AioError("the cluster's network is not there: run 'iostack aio start'")

        def for_nodes(name: str, info: ServiceInfo) -> str:
            return reachable_from_nodes(name, info.url, info.private, plan.gateway)

        return Cluster(cfg, secrets, plan, urls["memcached"].url, urls["redis"].url,
                       urls["rabbitmq"].url, for_nodes("memcached", urls["memcached"]),
                       for_nodes("rabbitmq", urls["rabbitmq"]))

    def replicate_once(self) -> None:
        """Run one pass of the replicators on every storage node (a cluster only)."""
        layout = self._swift_layout(aio_secrets.load_or_create(self.state_dir))
        if not isinstance(layout, Cluster):
            raise AioError("replication needs a cluster (iostack aio start --nodes 3)")
        layout.replicate_once()

    def _start_block_bridge(self, controller_url: str, token: str) -> dict[str, Any]:
        """The block bridge's JSON-RPC service (it runs its own tgtd for the iSCSI portal).

        It asks the controller for the stacks of volumes created without filters.
        """
        cfg = self.config
        conf_path = self.state_dir / "etc" / "block-bridge.json"
        conf: dict[str, Any] = {
            "user": "admin",
            "password": aio_secrets.generated_secret(self.state_dir, "block_bridge_password"),
            "state_dir": str(self.state_dir),
            "host": cfg.host, "port": cfg.block_port,
            "portal_host": cfg.host, "portal_port": cfg.iscsi_port,
            "controller_url": controller_url, "controller_token": token,
            "backend": cfg.block_backend,
            "allowed_devices": [d.strip() for d in cfg.block_devices.split(",") if d.strip()],
            # Every iSCSI target needs this CHAP pair and initiator name (aio.json has them).
            "chap_user": "iostack",
            "chap_password": aio_secrets.generated_secret(self.state_dir, "block_chap_password"),
            "initiators": [BLOCK_INITIATOR],
        }
        if cfg.block_demo:
            conf["demo_volume"] = DEMO_VOLUME
        write_private_json(conf_path, conf)
        ready = self.state_dir / "block" / "service.json"
        if self.processes.find(BLOCK_BRIDGE) is None:
            ready.unlink(missing_ok=True)  # left by a service that was killed
            if port_open(cfg.host, cfg.iscsi_port):
                raise AioError(f"{BLOCK_BRIDGE}: iSCSI port {cfg.host}:{cfg.iscsi_port} is "
                               "already in use; choose another with IOSTACK_ISCSI_PORT or "
                               "--iscsi-port")
        self._start_process(
            BLOCK_BRIDGE,
            [sys.executable, "-m", "iostack.block_bridge.service", "--config", str(conf_path)],
            (cfg.host, cfg.block_port),
        )
        self._wait_for(BLOCK_BRIDGE, ready.is_file, "start-up (block/service.json)")
        described = {
            "url": f"http://{cfg.host}:{cfg.block_port}/targetrpc",
            "user": conf["user"], "password": conf["password"],
            "iscsi_portal": f"{cfg.host}:{cfg.iscsi_port}",
            "iscsi_initiator": BLOCK_INITIATOR,
            "chap_user": conf["chap_user"], "chap_password": conf["chap_password"],
        }
        if cfg.block_demo:
            described["demo_volume"] = DEMO_VOLUME["name"]
        return described

    def _start_process(self, name: str, argv: list[str],
                       address: tuple[str, int] | None,
                       env: dict[str, str] | None = None) -> None:
        if self.processes.find(name):
            return
        if address is not None and port_open(*address):
            host, port = address
            raise AioError(
                f"{name}: port {host}:{port} is already in use by another program; "
                f"choose another with IOSTACK_{name.upper()}_PORT or --{name}-port"
            )
        self.processes.start(name, argv, env)

    def _wait_for(self, name: str, check, what: str) -> None:
        def alive_and_ready() -> bool:
            if self.processes.find(name) is None:
                raise AioError(
                    f"{name} exited during start-up; see {self.processes.log_file(name)}"
                )
            return check()

        if not wait_until(alive_and_ready, self.config.start_timeout, 0.1):
            raise AioError(
                f"{name} did not pass its {what} within {self.config.start_timeout:.0f}s; "
                f"see {self.processes.log_file(name)}"
            )

    def _describe(self, secrets: dict[str, str], redis_url: str, amqp_url: str,
                  memcache_url: str, controller_url: str) -> dict[str, Any]:
        proxy = self.config.proxy_url
        tenants = {
            tenant: {
                "account": tenant_account(tenant),
                "user": tenant_user(tenant),
                "key": secrets[f"{tenant}_key"],
                "storage_url": f"{proxy}/v1/{tenant_account(tenant)}",
            }
            for tenant in aio_secrets.TENANTS
        }
        return {
            "state_dir": str(self.state_dir),
            "auth_url": f"{proxy}/auth/v1.0",
            "swift_url": proxy,
            "proxy_urls": self.config.proxy_urls,
            "s3_url": proxy,
            "s3_region": "us-east-1",
            "redis_url": redis_url,
            "amqp_url": amqp_url,
            "namespace": self.config.namespace,
            "key_prefix": self.config.key_prefix,
            "sandbox": self.config.sandbox,
            "memcache_url": memcache_url,
            "controller_url": controller_url,
            "admin_token": secrets["controller_token"],
            "admin": {"user": "admin:admin", "key": secrets["admin_key"]},
            "tenants": tenants,
            "log_dir": str(self.processes.log_dir),
        }

    # -- stop / status ---------------------------------------------------------
    def stop(self, purge: bool = False) -> list[str]:
        """Stop every process recorded in the state dir; return their names.

        ``purge`` also deletes the stack's Redis keys (its namespace), once
        nothing of the stack can write them any more: for throw-away stacks
        (tests, benchmarks) on a Redis shared with others.
        """
        info = self.info() if purge else None
        stopped = [name for name in STOP_ORDER if self.processes.stop(name)]
        if self.engine.configured():
            # The sandboxes' containers outlive the Swift workers that started them
            # (podman removes them without its API service).
            self.engine.remove_containers()
            stopped += [ENGINE] if self.processes.stop(ENGINE) else []
        # The storage nodes' processes, and whatever else a component registered
        # (pid files we do not know by name), before the services they use.
        stopped += self.processes.stop_all(
            [name for name in self.processes.names() if name not in PRIVATE_SERVERS])
        if purge and info:
            purge_namespace(info["redis_url"], info["key_prefix"])
        stopped += self.services.stop_private()
        stopped += [name for name in self.processes.names() if self.processes.stop(name)]
        # Nothing runs in the namespaces any more, nor on the devices.
        stopped += self.network.destroy()
        stopped += devices.unmount_all(self.state_dir / "srv" / "node")
        self.info_path.unlink(missing_ok=True)
        return stopped

    def status(self) -> list[ComponentStatus]:
        rows = []
        for name, info in sorted(self.services.info.items()):
            if not info.private:
                rows.append(ComponentStatus(name, port_open(*host_port(info.url)),
                                            None, f"external {redact(info.url)}"))
        cfg = self.config
        if cfg.cluster:
            rows += self._node_rows()
            swift = cluster_process_names(cfg)
        else:
            swift = [*SERVERS[:-1], *DAEMONS, *["proxy", "proxy2"][:cfg.proxies]]
        expected = {CONTROLLER, BLOCK_BRIDGE, *swift,
                    *([KEYSTONE] if cfg.auth == "keystone" else []),
                    *([ENGINE] if cfg.sandbox == "docker" else [])}
        for name in sorted(set(self.processes.names()) | expected):
            proc = self.processes.find(name)
            rows.append(ComponentStatus(name, proc is not None, proc.pid if proc else None,
                                        str(self.processes.log_file(name))))
        return rows

    def _node_rows(self) -> list[ComponentStatus]:
        """One row per storage node: its namespace, address and link."""
        plan: NetworkPlan | None = self.network.plan
        if plan is None:
            return [ComponentStatus("network", False, None, "no cluster network (not started)")]
        present = set(namespaces())
        rows = []
        for n in range(1, plan.nodes + 1):
            there = plan.node_ns(n) in present
            up = there and self.network.link_up(n)
            link = "link up" if up else ("link down" if there else "namespace missing")
            rows.append(ComponentStatus(node_name(n), up, None,
                                        f"{plan.node_ns(n)} {plan.node_address(n)} zone "
                                        f"{(n - 1) % 3 + 1}, {link}"))
        return rows

    def warnings(self) -> list[str]:
        return self.services.warnings()

    def endpoints(self) -> list[tuple[str, str]]:
        """Where to reach the running stack, and the sandbox limits in force (``aio status``)."""
        info = self.info()
        if info is None:
            return []
        portal = info.get("block_bridge", {}).get("iscsi_portal")
        tgtd = port_open(*host_port(portal)) if portal else False
        return describe_endpoints(info, tgtd, sandbox_limits(Path(info["swift_dir"])))

    def info(self) -> dict[str, Any] | None:
        if not self.info_path.is_file():
            return None
        return json.loads(self.info_path.read_text(encoding="utf-8"))


def sandbox_limits(swift_dir: Path) -> str:
    """The Storlets sandbox runtime and its per-scope limits, from the gateway's config."""
    conf = ConfigParser(interpolation=None)
    proxy = ConfigParser(interpolation=None)
    if not conf.read(gateway_conf_path(swift_dir)) or not proxy.read(
            swift_dir / "proxy-server.conf"):
        return "not configured"
    module = proxy.get("filter:storlet_handler", "storlet_gateway_module", fallback="?")
    limits = conf["DEFAULT"]
    if module == "iostack_docker":
        runtime = (f"docker (Storlets' docker gateway; engine {limits.get('docker_url')}, "
                   f"image {limits.get('default_container_image_name')})")
        # The engine applies them through its cgroups (runc, cgroupfs) and ulimits; the
        # address space is the agent's rlimit.
        cgroups = "container cgroups: memory, processes, CPU quota"
    else:
        runtime = {"bwrap": "bubblewrap"}.get(module, module)
        if (CGROUP_FS / "cgroup.controllers").exists():
            cgroups = "cgroup v2"
        elif (CGROUP_FS / "pids").is_dir():
            cgroups = "cgroup v1"
        else:
            cgroups = "no cgroups: rlimits only"
    return (f"{runtime}, per tenant: memory {limits.get('sandbox_memory_limit')}, "
            f"{limits.get('container_pids_limit')} processes, "
            f"{limits.get('sandbox_cpu_seconds')} CPU s per process, "
            f"private tmp {limits.get('sandbox_tmp_size')}, read-only root, no network; "
            f"{cgroups} (iostack storlet sandbox list: which hold per running sandbox)")


def describe_endpoints(info: dict[str, Any], tgtd_up: bool,
                       sandbox: str) -> list[tuple[str, str]]:
    """(what, where) lines for ``aio status`` from a stack's ``aio.json``."""
    rows = [("swift proxy", ", ".join(info.get("proxy_urls") or [info["swift_url"]])),
            ("swift auth", f"{info['auth_url']} (users t1:user...; keys in aio.json)"),
            ("S3", f"{info['s3_url']} (region {info['s3_region']}; access key = user, "
                   f"secret = key)"),
            ("controller API", f"{info['controller_url']}/v1 (admin token in aio.json)"),
            ("console", f"{info['controller_url']}/ui"),
            ("redis", redact(info["redis_url"])),
            ("rabbitmq", redact(info["amqp_url"])),
            ("memcached", info["memcache_url"])]
    block = info.get("block_bridge")
    if block:
        rows.append(("block bridge", f"{block['url']} (JSON-RPC, basic auth)"))
        rows.append(("iSCSI portal", f"{block['iscsi_portal']} (tgtd, CHAP) "
                                     f"{'up' if tgtd_up else 'down'}"))
    rows.append(("sandbox", sandbox))
    rows.append(("logs", info["log_dir"]))
    return rows


def keystone_token(settings: dict[str, Any]) -> str:
    """A project-scoped token for the ``os_*`` settings of a tenant (``aio.json``)."""
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=settings["os_auth_url"], username=settings["os_username"],
                       password=settings["os_password"],
                       project_name=settings["os_project_name"],
                       user_domain_name=settings["os_user_domain_name"],
                       project_domain_name=settings["os_project_domain_name"])
    return session.Session(auth=auth, timeout=30).get_token()


def purge_namespace(redis_url: str, key_prefix: str) -> int:
    """Delete every Redis key under ``key_prefix``; return how many (0 if Redis is gone)."""
    try:
        client = connect(redis_url, socket_timeout=5)
        deleted = 0
        batch: list[bytes] = []
        # Namespaces hold no glob characters (AioConfig checks them).
        for key in client.scan_iter(match=f"{key_prefix}*", count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += client.delete(*batch)
                batch = []
        if batch:
            deleted += client.delete(*batch)
        return deleted
    except redis.RedisError as exc:
        print(f"iostack aio: could not purge {key_prefix}* from Redis: {exc}", file=sys.stderr)
        return 0
