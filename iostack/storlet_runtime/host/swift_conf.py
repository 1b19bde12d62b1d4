"""Swift config sections that enable Storlets with the bubblewrap or the container gateway.

The all-in-one (``iostack.aio.swift``) calls these when it writes the server
configs; a real deployment copies the same keys into its own configs.

Only keys Storlets 18 actually reads are written. In particular the code reads
``storlet_execute_on_proxy`` and ``storlet_logcontainer``; the sample configs'
``storlet_execute_on_proxy_only`` and ``storlet_log`` are silently ignored.

Files written under the Swift config dir:

``storlet-gateway.conf``
    The gateway's ``[DEFAULT]`` section (see ``iostack.storlet_runtime.host.config``):
    where scopes' storlets, channels, caches and logs live (``<state>/storlets``),
    the per-request timeout, the sandbox limits and ``libsbus_path``.
    ``sandbox_runtime`` names the runtime for the IOStack data path
    (``runner``): with the container runtime (``engine`` given:
    ``docker_url`` and ``default_container_image_name``, see
    ``docker_gateway``) it is ``docker`` and those keys are written too.
``storlet-internal-client.conf``
    The internal client the storlet middleware uses to fetch storlet code and
    store execution logs.
"""

from __future__ import annotations

from configparser import ConfigParser
from pathlib import Path

from iostack.storlet_runtime.host.config import DEFAULT_LIBSBUS

STORLET_CONTAINER = "storlet"
DEPENDENCY_CONTAINER = "dependency"
LOG_CONTAINER = "storletlog"
# A hung storlet answers 500 after this long; the sandbox is then torn down.
STORLET_TIMEOUT = 8
# The sandbox runtimes (``iostack aio start --sandbox``) -> their Storlets gateway entry points.
GATEWAY_MODULES = {"bubblewrap": "bwrap", "docker": "iostack_docker"}


def gateway_conf_path(swift_dir: Path) -> Path:
    return swift_dir / "storlet-gateway.conf"


def internal_client_conf_path(swift_dir: Path) -> Path:
    return swift_dir / "storlet-internal-client.conf"


def gateway_conf(host_root: Path, engine: dict[str, str] | None = None) -> ConfigParser:
    """``engine``: the container runtime's keys; without it the runtime is bubblewrap."""
    conf = ConfigParser(interpolation=None)
    conf["DEFAULT"] = {
        "host_root": str(host_root),
        "libsbus_path": str(DEFAULT_LIBSBUS),
        "storlet_timeout": str(STORLET_TIMEOUT),
        # Upstream polls the new sandbox every 0.5 s; it is up in ~0.1 s.
        "sandbox_ping_interval": "0.05",
        "restart_linux_container_timeout": "10",
        "storlet_daemon_factory_debug_level": "WARNING",
        "storlet_daemon_debug_level": "WARNING",
        "sandbox_memory_limit": "1G",
        "sandbox_cpu_seconds": "30",
        "container_pids_limit": "128",
        "sandbox_tmp_size": "64M",
        # Which gateway the IOStack data path runs sandboxed filters with (runner).
        "sandbox_runtime": "docker" if engine else "bubblewrap",
        **(engine or {}),
    }
    return conf


def internal_client_conf(swift_dir: Path, memcache_url: str) -> ConfigParser:
    conf = ConfigParser(interpolation=None)
    conf["DEFAULT"] = {"swift_dir": str(swift_dir)}
    conf["pipeline:main"] = {"pipeline": "catch_errors proxy-logging cache proxy-server"}
    conf["app:proxy-server"] = {"use": "egg:swift#proxy", "account_autocreate": "true"}
    conf["filter:cache"] = {"use": "egg:iostack#iostack_memcache", "memcache_servers": memcache_url}
    conf["filter:catch_errors"] = {"use": "egg:swift#catch_errors"}
    conf["filter:proxy-logging"] = {"use": "egg:swift#proxy_logging"}
    return conf


def filter_section(swift_dir: Path, execution_server: str, reseller_prefix: str,
                   runtime: str = "bubblewrap") -> dict[str, str]:
    """``[filter:storlet_handler]`` for the proxy (``proxy``) or object server (``object``),
    with the gateway of ``runtime`` (a key of ``GATEWAY_MODULES``)."""
    return {
        "use": "egg:storlets#storlet_handler",
        "execution_server": execution_server,
        "storlet_gateway_module": GATEWAY_MODULES[runtime],
        "storlet_gateway_conf": str(gateway_conf_path(swift_dir)),
        "internal_client_conf_path": str(internal_client_conf_path(swift_dir)),
        "storlet_container": STORLET_CONTAINER,
        "storlet_dependency": DEPENDENCY_CONTAINER,
        "storlet_logcontainer": LOG_CONTAINER,
        "storlet_execute_on_proxy": "false",
        "reseller_prefix": reseller_prefix,
    }


def write_support_files(host_root: Path, swift_dir: Path, memcache_url: str,
                        engine: dict[str, str] | None = None) -> None:
    """Write the gateway (sandboxes under ``host_root``; ``engine``: the container runtime's
    keys) and internal-client configs next to the server configs."""
    for path, conf in ((gateway_conf_path(swift_dir), gateway_conf(host_root, engine)),
                       (internal_client_conf_path(swift_dir),
                        internal_client_conf(swift_dir, memcache_url))):
        with open(path, "w", encoding="utf-8") as f:
            conf.write(f)
        path.chmod(0o600)
