"""Scope names and per-scope uids (``iostack.storlet_runtime.host.identity``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from iostack.storlet_runtime.host import identity
from iostack.storlet_runtime.host.identity import ScopeIdentityError, sandbox_scope, scope_uid


def test_accounts_sharing_13_characters_get_different_scopes():
    """Regression: upstream's scope is the account's first 13 characters, so these shared one."""
    dev, prod = sandbox_scope("AUTH_projectalpha-dev"), sandbox_scope("AUTH_projectalpha-prod")
    assert "AUTH_projectalpha-dev"[5:18] == "AUTH_projectalpha-prod"[5:18]  # the old scope
    assert dev != prod
    assert dev.startswith("projecta-") and prod.startswith("projecta-")


def test_scope_is_stable_readable_and_safe_as_a_name():
    scope = sandbox_scope("AUTH_t1")
    assert scope == sandbox_scope("AUTH_t1") and scope.startswith("t1-")
    assert len(scope.split("-")[1]) == 16
    weird = sandbox_scope("AUTH_../../etc Ünï")
    assert all(c.isalnum() or c == "-" for c in weird) and "/" not in weird


def test_a_storlets_account_with_a_user_part_is_the_account():
    # Storlets passes "account:user" for some requests; the scope is the account's.
    assert sandbox_scope("AUTH_t1:alice") == sandbox_scope("AUTH_t1")


@pytest.fixture(autouse=True)
def fresh_cache():
    identity._allocated.clear()
    yield
    identity._allocated.clear()


def test_each_scope_gets_its_own_uid_and_keeps_it(tmp_path):
    table, run = tmp_path / "uids.json", tmp_path / "stack"
    run.mkdir()
    a, b = scope_uid(table, run, "a", 5000, 10), scope_uid(table, run, "b", 5000, 10)
    assert (a, b) == (5000, 5001)
    identity._allocated.clear()  # another process reads the table
    assert scope_uid(table, run, "a", 5000, 10) == a


ALLOCATE = """
import sys
from iostack.storlet_runtime.host.identity import scope_uid
table, run, worker = sys.argv[1:4]
print(" ".join(str(scope_uid(table, run, f"s{worker}-{i}", 7000, 100)) for i in range(5)))
"""


def test_concurrent_processes_never_hand_out_one_uid_twice(tmp_path):
    table, run = str(tmp_path / "uids.json"), tmp_path / "stack"
    run.mkdir()
    workers = [subprocess.Popen([sys.executable, "-c", ALLOCATE, table, str(run), str(n)],
                                stdout=subprocess.PIPE, text=True) for n in range(4)]
    uids = [int(uid) for proc in workers for uid in proc.communicate(timeout=60)[0].split()]
    assert len(uids) == 20 and len(set(uids)) == 20
    assert sorted(json.loads((tmp_path / "uids.json").read_text()).values()) == sorted(uids)


def test_two_stacks_on_one_host_do_not_share_uids(tmp_path):
    table = tmp_path / "uids.json"
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    assert scope_uid(table, one, "t1-x", 100, 10) != scope_uid(table, two, "t1-x", 100, 10)


def test_uids_of_stacks_that_are_gone_are_reused_and_a_full_range_is_an_error(tmp_path):
    table, gone, live = tmp_path / "uids.json", tmp_path / "gone", tmp_path / "live"
    gone.mkdir(), live.mkdir()
    assert scope_uid(table, gone, "s", 100, 1) == 100
    with pytest.raises(ScopeIdentityError, match="all 1 sandbox uids"):
        scope_uid(table, live, "s", 100, 1)
    gone.rmdir()
    assert scope_uid(table, live, "s", 100, 1) == 100


def test_a_damaged_table_is_not_overwritten(tmp_path):
    table = tmp_path / "uids.json"
    table.write_text("{half")
    with pytest.raises(ScopeIdentityError, match="not valid JSON"):
        scope_uid(table, tmp_path, "s", 100, 10)
    assert table.read_text() == "{half"


def test_a_new_stacks_entry_is_never_pruned_by_a_concurrent_allocation(tmp_path):
    table, fresh = tmp_path / "uids.json", tmp_path / "new-stack" / "sandboxes"
    first = scope_uid(table, fresh, "a", 100, 10)  # the run directory did not exist yet
    identity._allocated.clear()
    assert scope_uid(table, tmp_path, "b", 100, 10) != first
