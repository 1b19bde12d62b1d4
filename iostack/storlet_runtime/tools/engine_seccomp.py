"""The container runtime's seccomp profile: Podman's default, refusing what bubblewrap's refuses.

``seccomp_profile(base, denied_syscalls())`` is Podman's own default profile
(``/usr/share/containers/seccomp.json``) with every system call the
bubblewrap sandbox refuses (the ``denied[]`` list of
``native/sandbox_seccomp.c``, read from that one source: ptrace, mount,
keyctl, bpf, unshare, setns...) answered ``EPERM`` whatever the base allowed,
so both runtimes refuse the same calls. The all-in-one writes it into its
engine's ``containers.conf`` (``iostack.aio.podman_engine``); an operator's engine
takes it the same way (``seccomp_profile = ...``).
"""

from __future__ import annotations

import re
from pathlib import Path

SYSTEM_SECCOMP = Path("/usr/share/containers/seccomp.json")
NATIVE_SECCOMP = Path(__file__).resolve().parents[1] / "native" / "sandbox_seccomp.c"


def denied_syscalls(source: Path = NATIVE_SECCOMP) -> list[str]:
    """The system calls the bubblewrap sandbox refuses with EPERM (its C source's list)."""
    match = re.search(r"denied\[\]\s*=\s*\{(.*?)\};", source.read_text(), re.S)
    if match is None:
        raise ValueError(f"{source}: no denied[] list")
    return re.findall(r'"([a-z0-9_]+)"', match.group(1))


def seccomp_profile(base: dict, denied: list[str]) -> dict:
    """``base`` (an OCI seccomp profile) with ``denied`` answered EPERM whatever it allowed."""
    refused = set(denied)
    rules = []
    for rule in base["syscalls"]:
        names = [n for n in rule["names"] if n not in refused] \
            if rule["action"] == "SCMP_ACT_ALLOW" else rule["names"]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": sorted(refused), "action": "SCMP_ACT_ERRNO", "errnoRet": 1})
    return {**base, "syscalls": rules}
