"""iSCSI access settings of the bridge: generated, checked, required."""

from __future__ import annotations

import json
import stat

import pytest

from iostack.block_bridge.access import AccessError, IscsiAccess
from iostack.block_bridge.service import ServiceConfig, write_config


def test_write_config_generates_a_chap_pair_and_an_initiator_acl(tmp_path):
    config = write_config(tmp_path / "block.json", tmp_path / "state")
    access = config.access()
    assert access.chap_user == "iostack" and len(access.chap_password) == 24
    assert access.initiators[0].startswith("iqn.2026-11.org.iostack:initiator.")
    other = write_config(tmp_path / "other.json", tmp_path / "state").access()
    assert other.chap_password != access.chap_password
    assert stat.S_IMODE((tmp_path / "block.json").stat().st_mode) == 0o600
    assert ServiceConfig.load(tmp_path / "block.json") == config


@pytest.mark.parametrize(("change", "text"), [
    ({"chap_password": ""}, "chap_password must be 12-64"),
    ({"chap_password": "short"}, "chap_password must be 12-64"),
    ({"chap_user": "a b"}, "chap_user must be"),
    ({"initiators": []}, "at least one initiator"),
    ({"initiators": ["ALL"]}, "at least one initiator"),
    ({"allowed_devices": ["dev/sda"]}, "absolute paths"),
])
def test_a_config_without_usable_iscsi_access_is_refused(tmp_path, change, text):
    """Security regression: a config with no CHAP pair or ACL started a bridge
    whose targets every initiator could use."""
    write_config(tmp_path / "block.json", tmp_path / "state")
    data = json.loads((tmp_path / "block.json").read_text()) | change
    (tmp_path / "block.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=text):
        ServiceConfig.load(tmp_path / "block.json")


def test_the_initiator_environment_carries_the_chap_pair():
    access = IscsiAccess("u", "p" * 12, ("iqn.2026-11.org.example:a",))
    assert access.initiator_env() == {"LIBISCSI_CHAP_USERNAME": "u",
                                      "LIBISCSI_CHAP_PASSWORD": "p" * 12}
    with pytest.raises(AccessError):
        IscsiAccess("u", "p" * 12, ("iqn.2026-11.org.Example:a",))  # IQNs are lower case
