"""Block filter metadata for the controller, DSL policies compiled into
stack specs, and storage groups."""

from __future__ import annotations

import pytest

from iostack.block_bridge.catalog import (
    block_filters,
    block_validators,
    filter_spec,
    redact_spec,
    redact_text,
    spec_from_pipeline,
)
from iostack.block_bridge.groups import GroupError, StorageGroup, attach_spec
from iostack.block_bridge.native_lib import StackError, validate
from iostack.dsl.checker import check_text
from iostack.dsl.errors import DSLError
from iostack.dsl.vocabulary import Vocabulary, filter_domain
from iostack.filters.metadata import FilterMetadata
from iostack.policy.resolve import Level, resolve_block

KEY = bytes(range(32)).hex()


@pytest.fixture(scope="module")
def metadata(native_build):
    return {m.name: m for m in block_filters()}


def test_every_shipped_filter_is_described_and_round_trips(metadata, native_build):
    shipped = {p.stem for p in (native_build / "filters").glob("*.so")}
    assert set(metadata) == shipped
    for meta in metadata.values():
        assert filter_domain(meta) == "block"
        assert FilterMetadata.from_json(meta.to_json()) == meta


def test_defaults_are_accepted_by_the_filters_themselves(metadata, native_build):
    for name, meta in metadata.items():
        params = {p.name: p.default for p in meta.params if p.default is not None}
        if name == "aes_xts":
            params["key"] = KEY
        validate(filter_spec(name, params))


def test_metadata_ranges_match_the_native_checks(metadata, native_build):
    checks = block_validators()
    for name, meta in metadata.items():
        for param in meta.params:
            if param.maximum is None or param.type == "secret":
                continue
            extra = {"key": KEY} if name == "aes_xts" else {}
            checks[name]({param.name: int(param.maximum), **extra})
            with pytest.raises(ValueError):
                checks[name]({param.name: int(param.maximum) * 2 + 1, **extra})


def test_spec_values_cannot_smuggle_stack_syntax():
    with pytest.raises(StackError):
        filter_spec("xor", {"key": "1)>prefetch(window=4096"})
    with pytest.raises(StackError):
        filter_spec("aes_xts", {"key": "ab,cd"})
    assert filter_spec("bw", {"read": 1.5e6, "write": None}) == "bw(read=1500000)"


def policy_pipeline(text: str, metadata) -> list[dict]:
    """Check policies with the DSL and resolve them as the controller does."""
    vocabulary = Vocabulary(filters=dict(metadata))
    result = check_text(text, vocabulary)
    levels: dict[tuple[str, str], list[dict]] = {}
    for seq, policy in enumerate(result.policies):
        for kind, target in policy.targets:
            for index, action in enumerate(policy.actions):
                levels.setdefault((kind, target), []).append(
                    action.to_json() | {"seq": seq, "index": index, "policy": str(seq)})
    ordered = [Level(kind, target, tuple(rules)) for (kind, target), rules
               in sorted(levels.items(), key=lambda kv: kv[0][0] != "storage_group")]
    return [e.to_json() for e in resolve_block(ordered, vocabulary.filters).pipeline]


def test_volume_and_group_policies_compile_to_a_loadable_stack(metadata, native_build):
    pipeline = policy_pipeline(
        "FOR STORAGE_GROUP gold DO SET PREFETCH, SET CCACHE WITH size=16M\n"
        "FOR VOLUME vol7 DO SET XOR WITH key=0x5a, SET IOPS WITH read=500", metadata)
    spec = spec_from_pipeline(pipeline)
    assert spec == ("iops(read=500,write=0)>ccache(level=1,size=16777216)>xor(key=90)"
                    ">prefetch(trigger=2,window=524288)")
    validate(spec)


def test_bad_block_policy_is_a_dsl_error(metadata):
    with pytest.raises(DSLError) as err:
        policy_pipeline("FOR VOLUME vol7 DO SET XOR WITH key=300", metadata)
    assert "key" in str(err.value)


def test_storage_group_policy_limits_fill_in_what_no_policy_set(native_build):
    group = StorageGroup.from_json({"name": "gold", "nodes": ["node1", "node2"],
                                    "policy": {"media_tier": "nvme", "iops": 1000, "mbps": 50}})
    assert StorageGroup.from_json(group.to_json()) == group
    spec = attach_spec(group, [{"filter": "xor", "params": {"key": 7}}])
    assert spec == ("iops(read=1000,write=1000)>bw(read=52428800,write=52428800)"
                    ">xor(key=7)")
    validate(spec)
    own = attach_spec(group, [{"filter": "iops", "params": {"read": 5}}])
    assert own == "bw(read=52428800,write=52428800)>iops(read=5)"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "g", "nodes": []}, "at least one storage node"),
        ({"name": "1g", "nodes": ["n"]}, "bad storage group name"),
        ({"name": "g", "nodes": ["n"], "policy": {"media_tier": "tape"}}, "media_tier"),
        ({"name": "g", "nodes": ["n"], "policy": {"iops": -1}}, "iops must be"),
        ({"name": "g", "nodes": ["n"], "policy": {"colour": 1}}, "bad policy"),
        ({"name": "g", "nodes": ["n"], "owner": "x"}, "unknown storage group fields"),
    ],
)
def test_bad_storage_groups_are_rejected(data, message):
    with pytest.raises(GroupError) as err:
        StorageGroup.from_json(data)
    assert message in str(err.value)


@pytest.mark.parametrize(("spec", "shown"), [
    (f"iops(read=3)>aes_xts(key={KEY},sector=4096)>xor(key=0x5a)",
     "iops(read=3)>aes_xts(key=***,sector=4096)>xor(key=0x5a)"),
    (f"aes_xts(key {KEY}, sector 512)", "aes_xts(key=***, sector 512)"),
    (f"AES_XTS( key={KEY} )", "AES_XTS(key=***)"),
    ("xor(key=0x5a)>bitrev", "xor(key=0x5a)>bitrev"), ("", ""),
])
def test_secret_arguments_are_masked_in_what_the_bridge_shows(spec, shown):
    assert redact_spec(spec) == shown
    assert KEY not in redact_text(f"filter rejected arguments '{spec}'", spec)
