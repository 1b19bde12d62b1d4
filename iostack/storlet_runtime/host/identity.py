"""Who a tenant's sandbox is: its scope name and its own host uid.

Scope
    Storlets names a sandbox after the first 13 characters of the account
    (reseller prefix removed), so ``AUTH_projectalpha-dev`` and
    ``AUTH_projectalpha-prod`` would share one sandbox, its ``/tmp`` and its
    daemons. ``sandbox_scope`` derives the scope from a SHA-256 of the *whole*
    account instead: a short readable prefix (at most 8 characters of the
    account, for ``iostack storlet sandbox list`` and the logs) and 16 hex
    digits (64 bits) of the hash. The gateway re-derives it from the account
    Storlets passes with every request (``options['scope']``), so the proxy
    and the object servers agree on it.

Uid
    Every scope runs as its own host uid, so one tenant's processes count
    against no other tenant's ``RLIMIT_NPROC``, and no tenant's processes
    may signal, ptrace or read the files of another's (the channels are
    ``0700`` and owned by that uid). Uids are allocated, never hashed (a
    collision would merge two tenants), from a reserved range set in the
    gateway config: ``sandbox_uid_base`` (default 1700000000) and
    ``sandbox_uid_count`` (default 65536). The default lies inside the range
    systemd documents for container uids (524288-1879048191) and far from
    the 100000+ blocks ``/etc/subuid`` usually hands out; the operator must
    keep the range free of other users. The allocation is recorded in one
    table per host (``sandbox_uid_table``, default
    ``/var/lib/iostack/sandbox-uids.json``), keyed by the stack's sandbox run
    directory and the scope, under a lock: every server process and every
    restart gives a scope the same uid, and two stacks on one host (the test
    suite's) never hand one uid to two tenants. Entries of run directories
    that no longer exist are dropped when a uid is allocated. The group is
    the uid's own number.

    Only a root server can run a sandbox as another uid; a server that is
    not root runs every sandbox as itself (documented in docs/security.md:
    the per-tenant identity then comes from the cgroup only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from iostack.private_files import write_private_json
from iostack.storlet_runtime.host.flock import held

SCOPE_PREFIX_CHARS = 8
SCOPE_HASH_CHARS = 16
DEFAULT_UID_TABLE = "/var/lib/iostack/sandbox-uids.json"
_UNSAFE = re.compile(r"[^a-z0-9]")
# (table, run dir, scope, base, count) -> uid: an allocation never changes, so each process
# reads it once.
_allocated: dict[tuple[str, str, str, int, int], int] = {}


class ScopeIdentityError(RuntimeError):
    """No uid can be given to a scope (range exhausted, unreadable allocation)."""


def sandbox_scope(account: str) -> str:
    """The sandbox scope of ``account``: a readable prefix and a hash of the whole name.

    The prefix is what follows the reseller prefix (``AUTH_t1`` -> ``t1``),
    lower-cased letters and digits only; it is for people, the hash decides.
    """
    name = account.rsplit(":", 1)[0] if account.rfind(":") > 0 else account
    short = name.split("_", 1)[-1]
    prefix = _UNSAFE.sub("", short.lower())[:SCOPE_PREFIX_CHARS] or "scope"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{prefix}-{digest[:SCOPE_HASH_CHARS]}"


def scope_uid(table: str | Path, run_dir: str | Path, scope: str, base: int, count: int) -> int:
    """The host uid of ``run_dir``'s ``scope``, allocated from ``[base, base + count)``."""
    # The run directory exists before its entry does: entries of missing ones are pruned.
    Path(run_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    key = (str(table), str(Path(run_dir).resolve()), scope, base, count)
    if key not in _allocated:
        _allocated[key] = _allocate(Path(key[0]), key[1], scope, base, count)
    return _allocated[key]


def _allocate(table: Path, run_dir: str, scope: str, base: int, count: int) -> int:
    table.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{run_dir} {scope}"
    lock = table.with_name(table.name + ".lock")
    with held(lock, 10.0, lambda: ScopeIdentityError(f"{lock} locked for over 10s")):
        try:
            uids = json.loads(table.read_text())
        except FileNotFoundError:
            uids = {}
        except ValueError as exc:
            raise ScopeIdentityError(f"{table} is not valid JSON ({exc}); "
                                     "refusing to hand out uids that may be taken") from None
        if name in uids and base <= int(uids[name]) < base + count:
            return int(uids[name])
        uids = {key: uid for key, uid in uids.items()
                if os.path.isdir(key.rsplit(" ", 1)[0])}  # stacks that are gone
        taken = set(uids.values())
        free = next((uid for uid in range(base, base + count) if uid not in taken), None)
        if free is None:
            raise ScopeIdentityError(
                f"all {count} sandbox uids from {base} are taken; raise sandbox_uid_count")
        uids[name] = free
        write_private_json(table, uids, indent=None)
        return free
