"""The Storlets sandbox runtime each ``storlet_handler`` names, checked where it runs.

For every distinct gateway (``storlet_gateway_module`` and
``storlet_gateway_conf``) of the loaded pipelines:

- ``bwrap`` (bubblewrap): ``bwrap``, ``prlimit``, ``libsbus.so`` and the
  compiled seccomp program are where the gateway config says;
- ``iostack_docker`` (Storlets' docker gateway, ``docker_gateway``): the
  Docker SDK is installed, the engine answers on ``docker_url`` (``unix://``
  socket of Docker or of ``podman system service``) and holds the storlet
  image ``default_container_image_name``; ``libsbus.so`` exists;
- Storlets' own ``docker`` or ``podman``: a warning, as they run a tenant's
  code with the server's uid, a writable root and the host's ``/dev/log``.
"""

from __future__ import annotations

import configparser
import os

from iostack.doctor import Finding, error, ok, warning
from iostack.doctor.pipelines import Pipeline
from iostack.storlet_runtime.host.config import SandboxConfig, SandboxConfigError

IMAGE_FIX = ("build it: iostack storlet image --podman /usr/bin/podman (or iostack aio start "
             "--sandbox docker, which builds it for the all-in-one)")


def check_runtimes(pipelines: list[Pipeline]) -> list[Finding]:
    """Findings for each distinct sandbox gateway of these pipelines."""
    seen: set[tuple[str, str]] = set()
    findings: list[Finding] = []
    for pipeline in pipelines:
        stage = pipeline.find("storlet_handler")
        if stage is None:
            continue
        key = (stage.conf.get("storlet_gateway_module", "stub"),
               stage.conf.get("storlet_gateway_conf", ""))
        if key in seen or not os.path.isfile(key[1]):  # a missing file: pipelines says so
            continue
        seen.add(key)
        findings += check_gateway(*key)
    return findings


def _gateway_conf(path: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()
    parser.read(path)
    return dict(parser.items("DEFAULT"))


def check_gateway(module: str, conf_path: str) -> list[Finding]:
    where = f"{conf_path} (storlet_gateway_module = {module})"
    conf = _gateway_conf(conf_path)
    if module in ("docker", "podman"):
        return [warning(where, f"Storlets' own {module} gateway runs tenant code as the "
                               "server's uid, with a writable root and the host's /dev/log",
                        "use storlet_gateway_module = iostack_docker (docs/deploy.md)")]
    if module not in ("bwrap", "iostack_docker"):
        return []
    try:
        cfg = SandboxConfig.from_gateway_conf(conf)
    except SandboxConfigError as exc:
        return [error(where, str(exc), "fix the gateway config (docs/storlets.md)")]
    files = [cfg.libsbus_path]
    if module == "bwrap":
        files += [cfg.bwrap_path, cfg.prlimit_path, cfg.seccomp_path]
    missing = [path for path in files if not os.path.exists(path)]
    if missing:
        return [error(where, f"missing: {', '.join(missing)}",
                      "apt-get install bubblewrap util-linux libseccomp-dev; make -C "
                      "iostack/storlet_runtime/native")]
    if module == "bwrap":
        return [ok(where, "bubblewrap sandbox: bwrap, prlimit, libsbus and seccomp present")]
    return check_engine(where, conf)


def check_engine(where: str, conf: dict[str, str]) -> list[Finding]:
    """The engine answers and holds the storlet image."""
    try:
        import docker
        import docker.errors
    except ImportError:
        return [error(where, "the Docker SDK is not installed",
                      "pip install 'iostack[docker]'")]
    url = conf.get("docker_url")
    image = conf.get("default_container_image_name", "storlet_engine_image")
    try:
        client = (docker.DockerClient(base_url=url, timeout=10) if url
                  else docker.from_env(timeout=10))
        version = client.version()
    except (docker.errors.DockerException, OSError) as exc:
        return [error(where, f"the container engine does not answer at "
                             f"{url or 'DOCKER_HOST'}: {exc}",
                      "start it (podman system service --time=0 unix:///PATH, or dockerd) "
                      "and set docker_url")]
    engine = f"{version.get('Components', [{}])[0].get('Name', 'engine')} " \
             f"{version.get('Version', '?')} at {url or 'DOCKER_HOST'}"
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return [error(where, f"{engine}: the storlet image {image} is not there", IMAGE_FIX)]
    except (docker.errors.DockerException, OSError) as exc:
        return [error(where, f"{engine}: could not look up image {image}: {exc}", IMAGE_FIX)]
    return [ok(where, f"docker sandbox: {engine} answers and holds the storlet image {image}")]
