"""A Podman service for the container runtime (``--sandbox docker``), owned by one stack.

Podman's Docker-compatible API is what Storlets' ``docker`` gateway (and
``docker_gateway``, our subclass of it) talks to through the Docker SDK.
``PodmanEngine(root)`` keeps everything under ``root`` (the all-in-one's
``<state dir>/engine``), never in ``/etc/containers`` or ``/var/lib/containers``:

``containers.conf``
    ``runtime = "runc"`` (Debian's default ``crun`` refuses hybrid cgroup
    hosts), ``cgroup_manager = "cgroupfs"``, events to a file, default
    ulimits the host's hard limits allow, no ``/etc/hosts`` in containers,
    and the seccomp profile below.
``storage.conf``
    Images and containers under ``root/storage`` (overlay), run state
    under ``root/run``.
``seccomp.json``
    Podman's own default profile with the system calls the bubblewrap
    sandbox refuses (``native/sandbox_seccomp.c``'s list: ptrace, mount,
    keyctl, bpf, unshare, setns...) answered ``EPERM``, so both runtimes
    refuse the same calls.
``podman.sock``
    The API socket (``podman system service``; ``url``).

``env`` is what a ``podman`` command needs to act on this engine (the image
build, ``iostack doctor``); ``remove_containers`` removes every container of
the engine (the stack's sandboxes outlive the Swift workers that started
them, so ``aio stop`` removes them).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from iostack.private_files import private_dir, write_private_text
from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.tools import engine_image
from iostack.storlet_runtime.tools.engine_seccomp import (
    SYSTEM_SECCOMP,
    denied_syscalls,
    seccomp_profile,
)

PODMAN = "/usr/bin/podman"
# runc cannot raise a limit past the host's hard one (Podman's default nofile is higher).
DEFAULT_ULIMITS = ("nofile=1024:1024", "nproc=1024:1024")


class PodmanEngine:
    """The paths, settings and commands of one private Podman service."""

    def __init__(self, root: Path, podman: str = PODMAN) -> None:
        self.root = Path(root)
        self.podman = podman

    @property
    def socket_path(self) -> Path:
        return self.root / "podman.sock"

    @property
    def url(self) -> str:
        """The Docker-compatible API (``docker.DockerClient(base_url=...)``)."""
        return f"unix://{self.socket_path}"

    @property
    def env(self) -> dict[str, str]:
        return {"CONTAINERS_CONF": str(self.root / "containers.conf"),
                "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf")}

    def prepare(self) -> None:
        """Write the engine's configs (again: they follow this version of the code)."""
        private_dir(self.root)
        for sub in ("storage", "run", "tmp"):
            private_dir(self.root / sub)
        seccomp = self.root / "seccomp.json"
        profile = seccomp_profile(json.loads(SYSTEM_SECCOMP.read_text()), denied_syscalls())
        write_private_text(seccomp, json.dumps(profile, indent=1))
        ulimits = ", ".join(f'"{u}"' for u in DEFAULT_ULIMITS)
        write_private_text(self.root / "containers.conf", "\n".join([
            "[containers]",
            f"default_ulimits = [{ulimits}]",
            f'seccomp_profile = "{seccomp}"',
            "no_hosts = true",
            "[engine]",
            'runtime = "runc"',
            'cgroup_manager = "cgroupfs"',
            'events_logger = "file"',
            f'tmp_dir = "{self.root / "tmp"}"',
            "",
        ]))
        write_private_text(self.root / "storage.conf", "\n".join([
            "[storage]",
            'driver = "overlay"',
            f'graphroot = "{self.root / "storage"}"',
            f'runroot = "{self.root / "run"}"',
            "",
        ]))

    def configured(self) -> bool:
        """Whether ``prepare`` ran here (a stack started with this engine)."""
        return (self.root / "storage.conf").is_file()

    def service_argv(self) -> list[str]:
        """The API service's command line (run with ``env``; it never exits on idle)."""
        return [self.podman, "system", "service", "--time=0", self.url]

    def answers(self) -> bool:
        """Whether the API answers on the socket."""
        import docker
        import docker.errors

        if not self.socket_path.exists():
            return False
        try:
            return bool(docker.DockerClient(base_url=self.url, timeout=5).ping())
        except (docker.errors.DockerException, OSError):
            return False

    def ensure_image(self) -> str:
        """The storlet image's name, built first when its inputs changed (``engine_image``),
        for the gateway's default Python path (the all-in-one's gateway config sets none)."""
        packages = SandboxConfig.from_gateway_conf({}).python_path
        return engine_image.ensure_image(self.podman, self.env, self.root / "tmp", packages)

    def remove_containers(self) -> None:
        """Remove every container of this engine (all are the stack's sandboxes)."""
        subprocess.run([self.podman, "rm", "--all", "--force", "--time", "0"],  # noqa: S603
                       capture_output=True, env={**os.environ, **self.env}, timeout=120,
                       check=False)

