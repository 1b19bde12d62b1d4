"""Precedence, merging, object conditions, methods and ordering of ``resolve`` (pure)."""

from __future__ import annotations

import pytest

from iostack.controller.builtins import OBJECT_TYPES
from iostack.filters.metadata import FilterMetadata
from iostack.policy.resolve import Level, PipelineEntry, RequestInfo, order_pipeline, resolve


def rule(filter_, verb="set", seq=1, index=0, policy=None, **extra):
    return {"verb": verb, "filter": filter_, "seq": seq, "index": index,
            "policy": policy or f"P{seq}", "id": f"P{seq}.{index}", "params": {},
            "object_conds": [], **extra}


def run(filters, levels, method="PUT", path="/v1/AUTH_t1/logs/a.csv", size=100, headers=None):
    request = RequestInfo.from_path(method, path, size=size, headers=headers)
    return resolve(request, [Level(lv, t, tuple(rs)) for lv, t, rs in levels], filters,
                   OBJECT_TYPES)


def test_request_info_from_path_and_headers():
    req = RequestInfo.from_path("put", "/v1/AUTH_t1/logs/dir/a%20b.csv",
                                headers={"Content-Length": "42", "X-Object-Meta-Class": "hot",
                                         "Content-Type": "text/csv"})
    assert (req.method, req.account, req.container, req.obj) == \
        ("PUT", "AUTH_t1", "logs", "dir/a b.csv")
    assert (req.size, req.tags, req.content_type) == (42, {"class": "hot"}, "text/csv")
    assert req.targets(["gold"]) == [
        ("global", "*"), ("group", "gold"), ("tenant", "AUTH_t1"), ("container", "*/logs"),
        ("container", "AUTH_t1/logs"), ("object", "AUTH_t1/logs/dir/a b.csv")]
    with pytest.raises(ValueError, match="not a Swift path"):
        RequestInfo.from_path("GET", "/AUTH_t1/c")


def test_more_specific_level_overrides_named_params_and_inherits_the_rest(filters):
    res = run(filters, [
        ("tenant", "AUTH_t1", [rule("compression", params={"level": 6, "algorithm": "gzip"})]),
        ("container", "AUTH_t1/logs", [rule("compression", seq=2, params={"level": 9})]),
    ])
    (entry,) = res.pipeline
    assert entry.params == {"algorithm": "gzip", "level": 9, "frame_size": 262144}
    assert [s["level"] for s in entry.sources] == ["tenant", "container"]
    assert "overrides level" in res.notes[-1].reason


def test_container_pipeline_adds_to_tenant_pipeline_instead_of_hiding_it(filters):
    res = run(filters, [
        ("global", "*", [rule("noop")]),
        ("tenant", "AUTH_t1", [rule("encryption", seq=2)]),
        ("container", "AUTH_t1/logs", [rule("compression", seq=3)]),
    ])
    # compression's runs_before puts it ahead of encryption whatever the levels.
    assert [e.filter for e in res.pipeline] == ["noop", "compression", "encryption"]


def test_delete_at_a_more_specific_level_removes_the_inherited_filter(filters):
    res = run(filters, [
        ("tenant", "AUTH_t1", [rule("compression"), rule("encryption", index=1)]),
        ("container", "AUTH_t1/logs", [rule("compression", verb="delete", seq=2)]),
    ])
    assert [e.filter for e in res.pipeline] == ["encryption"]
    assert any(n.outcome == "removed" and n.level == "container" for n in res.notes)


def test_a_more_specific_layout_owner_replaces_the_inherited_one(filters):
    res = run(filters, [
        ("tenant", "AUTH_t1", [rule("compression")]),
        ("container", "AUTH_t1/logs", [rule("xcompress", seq=2)]),
    ])
    assert [e.filter for e in res.pipeline] == ["xcompress"]
    (note,) = [n for n in res.notes if n.outcome == "replaced"]
    assert note.filter == "compression" and "same stored layout" in note.reason


def test_object_conditions(filters):
    conds = [{"kind": "type", "value": "CSV"}, {"kind": "size", "op": ">", "value": 50},
             {"kind": "tag", "key": "class", "value": "hot"}, {"kind": "name", "value": "^a"}]
    levels = [("tenant", "AUTH_t1", [rule("noop", object_conds=conds)])]
    hot = {"X-Object-Meta-Class": "hot"}
    assert [e.filter for e in run(filters, levels, headers=hot).pipeline] == ["noop"]
    for kwargs, why in [({"size": 10, "headers": hot}, "size 10 is not > 50"),
                        ({"size": None, "headers": hot}, "size unknown"),
                        ({"headers": {}}, "object tag class is not 'hot'"),
                        ({"path": "/v1/AUTH_t1/logs/b.csv", "headers": hot},
                         "object name does not match '^a'"),
                        ({"path": "/v1/AUTH_t1/logs/a.txt", "headers": hot},
                         "object is not of type CSV"),
                        ({"path": "/v1/AUTH_t1/logs", "headers": hot}, "not an object request")]:
        res = run(filters, levels, **kwargs)
        assert res.pipeline == []
        assert why in res.notes[0].reason


def test_object_type_patterns_can_match_the_content_type(filters):
    levels = [("tenant", "AUTH_t1", [rule("noop", object_conds=[{"kind": "type",
                                                                 "value": "IMAGES"}])])]
    res = run(filters, levels, path="/v1/AUTH_t1/c/blob", headers={"Content-Type": "image/png"})
    assert [e.filter for e in res.pipeline] == ["noop"]


def test_filters_not_acting_on_the_method_are_dropped_with_a_reason(filters):
    levels = [("tenant", "AUTH_t1", [rule("compression"), rule("caching", index=1)])]
    put = run(filters, levels, method="PUT")
    get = run(filters, levels, method="GET")
    assert [e.filter for e in put.pipeline] == ["compression"]
    assert [e.filter for e in get.pipeline] == ["caching"]
    (note,) = [n for n in get.notes if n.outcome == "not-for-method"]
    assert "acts on PUT, not GET" in note.reason and "sysmeta" in note.reason


def test_policy_methods_and_stage_override_metadata_defaults(filters):
    res = run(filters, [("tenant", "AUTH_t1",
                         [rule("noop", methods=["GET"], stage="object")])], method="GET")
    assert res.pipeline[0].as_tuple() == ("noop", {}, "object", False)
    assert run(filters, [("tenant", "AUTH_t1", [rule("noop", methods=["GET"])])]).pipeline == []


def test_rules_of_unregistered_filters_are_skipped(filters):
    res = run(filters, [("tenant", "AUTH_t1", [rule("gone")])])
    assert res.pipeline == [] and res.notes[0].reason == "filter is no longer registered"


def test_explicit_order_wins_and_ties_keep_first_appearance(filters):
    def entry(name, order=None):
        return PipelineEntry(name, {}, "proxy", False, order)

    got = order_pipeline([entry("encryption", 1), entry("compression", 2)], filters)
    assert [e.filter for e in got] == ["encryption", "compression"]
    got = order_pipeline([entry("noop"), entry("encryption"), entry("compression"),
                          entry("caching")], filters)
    assert [e.filter for e in got] == ["noop", "compression", "encryption", "caching"]
    got = order_pipeline([entry("noop"), entry("caching", 1)], filters)
    assert [e.filter for e in got] == ["caching", "noop"]


def test_storlet_filters_are_sandboxed(filters):
    filters["upper"] = FilterMetadata("upper", "toy", extra={"runtime": "storlet"})
    res = run(filters, [("tenant", "AUTH_t1", [rule("upper")])])
    assert res.pipeline[0].sandboxed is True


def test_a_policy_chooses_sandboxed_or_native_and_specific_levels_win(filters):
    tenant = ("tenant", "AUTH_t1", [rule("noop", runtime="storlet")])
    assert run(filters, [tenant]).pipeline[0].sandboxed is True
    container = ("container", "AUTH_t1/logs", [rule("noop", seq=2, runtime="native")])
    assert run(filters, [tenant, container]).pipeline[0].sandboxed is False
    assert run(filters, [("tenant", "AUTH_t1", [rule("noop")])]).pipeline[0].sandboxed is False
