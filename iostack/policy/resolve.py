"""Which filters apply to one request, and why: the single resolution logic.

Both the data path (``reader.PolicyReader``) and the controller's ``explain``
call ``resolve``; it is pure (no I/O), so what ``explain`` shows is what the
middleware does.

Rules come from the levels that concern the request, most general first:
global, the tenant's groups, the tenant, the container written for any
account (``*/name``), the container, the object. Within a level rules apply
in submission order. For each filter:

- ``SET`` adds the filter, or, when a less specific level (or an earlier
  policy) already set it, overrides the parameters it names and inherits the
  rest; ``ON``/``ORDER`` given later override too.
- ``DELETE`` removes the filter from what the request inherited so far.
- A filter that owns the stored byte layout replaces a less specific filter
  of the same ``layout_group`` (a container's zstd compressor wins over the
  tenant's gzip one instead of compressing twice).
- Rules whose ``TO`` conditions do not hold for this object are skipped.
  ``OBJECT_AGE`` is the time since the object was last written: 0 for the
  write itself, its real age in reconcile passes over stored objects.

Then filters that do not act on the request's method are dropped (a PUT-only
transform is undone on GET from the object's sysmeta, not from policy),
defaults fill missing parameters, and the pipeline is ordered: ``ORDER n``
first, then each filter's ``runs_before`` constraints, then first appearance.

Volumes (``resolve_block``) follow the same rules over two levels: the
storage group, then the volume; requests and object conditions do not apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from iostack.filters.metadata import FilterMetadata
from iostack.filters.regex import search

MIME_PREFIX = "mime:"


@dataclass(frozen=True)
class RequestInfo:
    """What the data path knows about a request before running filters."""

    method: str
    account: str
    container: str | None = None
    obj: str | None = None
    size: int | None = None
    content_type: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)  # object metadata, lower-case keys
    # (container, object) pairs whose rules apply, most general first: the
    # request's own by default; a write that lands elsewhere than where the
    # tenant wrote (S3 multipart parts, archived versions) adds the origin first.
    policy_paths: tuple[tuple[str | None, str | None], ...] = ()
    # Seconds since the object was last written: a write makes a new object (age 0);
    # reconcile passes give stored objects theirs (``TO OBJECT_AGE``).
    age: float = 0.0

    def __post_init__(self) -> None:
        if not self.policy_paths:
            object.__setattr__(self, "policy_paths", ((self.container, self.obj),))

    @classmethod
    def from_path(cls, method: str, path: str, size: int | None = None,
                  headers: Mapping[str, str] | None = None) -> RequestInfo:
        """Build from a Swift path ``/v1/<account>[/<container>[/<object>]]`` and headers."""
        parts = unquote(path).lstrip("/").split("/", 3)
        if len(parts) < 2 or parts[0] != "v1" or not parts[1]:
            raise ValueError(f"not a Swift path: {path!r} (expected /v1/<account>/...)")
        headers = {k.lower(): v for k, v in (headers or {}).items()}
        if size is None and headers.get("content-length", "").isdigit():
            size = int(headers["content-length"])
        tags = {k[len("x-object-meta-"):]: v for k, v in headers.items()
                if k.startswith("x-object-meta-")}
        return cls(method.upper(), parts[1], (parts[2] or None) if len(parts) > 2 else None,
                   (parts[3] or None) if len(parts) > 3 else None, size,
                   headers.get("content-type"), tags)

    def targets(self, groups: list[str]) -> list[tuple[str, str]]:
        """The (level, target) pairs whose rules concern this request, most general first."""
        found = [("global", "*")] + [("group", g) for g in sorted(groups)]
        found.append(("tenant", self.account))
        for container, obj in self.policy_paths:
            if container:
                found += [("container", f"*/{container}"),
                          ("container", f"{self.account}/{container}")]
                if obj:
                    found.append(("object", f"{self.account}/{container}/{obj}"))
        return found


@dataclass(frozen=True)
class Level:
    level: str
    target: str
    rules: tuple[dict[str, Any], ...]  # rule JSON as stored (see docs/redis-keys.md)


@dataclass
class PipelineEntry:
    filter: str
    params: dict[str, Any]
    stage: str
    sandboxed: bool
    order: int | None = None
    methods: tuple[str, ...] = ()
    sources: list[dict[str, str]] = field(default_factory=list)

    def as_tuple(self) -> tuple[str, dict[str, Any], str, bool]:
        return self.filter, self.params, self.stage, self.sandboxed

    def to_json(self) -> dict[str, Any]:
        return {"filter": self.filter, "params": self.params, "stage": self.stage,
                "sandboxed": self.sandboxed, "order": self.order, "sources": self.sources}


@dataclass(frozen=True)
class Note:
    """What happened to one rule (or filter) during resolution."""

    filter: str
    outcome: str  # applied | overridden | removed | replaced | skipped | not-for-method
    reason: str
    policy: str | None = None
    level: str | None = None
    target: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"filter": self.filter, "outcome": self.outcome, "reason": self.reason,
                "policy": self.policy, "level": self.level, "target": self.target}


@dataclass
class Resolution:
    pipeline: list[PipelineEntry]
    notes: list[Note]

    def to_json(self) -> dict[str, Any]:
        return {"pipeline": [e.to_json() for e in self.pipeline],
                "notes": [n.to_json() for n in self.notes]}


def resolve(request: RequestInfo, levels: list[Level], filters: Mapping[str, FilterMetadata],
            object_types: Mapping[str, list[str]]) -> Resolution:
    """The ordered pipeline for ``request`` from the rules of ``levels`` (most general first)."""
    entries, notes = merge_levels(
        levels, filters, lambda conds: match_object_conds(conds, request, object_types))
    pipeline = []
    for entry in entries:
        meta = filters[entry.filter]
        methods = entry.methods or tuple(sorted(meta.methods))
        if request.method not in methods:
            notes.append(Note(entry.filter, "not-for-method",
                              f"{entry.filter} acts on {'/'.join(methods)}, not {request.method}"
                              + _reverse_hint(meta, request.method)))
            continue
        pipeline.append(entry)
    return Resolution(order_pipeline(pipeline, filters), notes)


def resolve_block(levels: list[Level], filters: Mapping[str, FilterMetadata]) -> Resolution:
    """The filter stack of a volume: its storage group's rules, then its own."""
    entries, notes = merge_levels(levels, filters, lambda conds: (True, ""))
    return Resolution(order_pipeline(entries, filters), notes)


def merge_levels(levels: list[Level], filters: Mapping[str, FilterMetadata],
                 holds) -> tuple[list[PipelineEntry], list[Note]]:
    """Apply the rules level by level (see the module docstring); defaults filled at the end.

    ``holds(object_conds)`` says whether a rule's ``TO`` conditions hold, and if not, why.
    """
    entries: dict[str, PipelineEntry] = {}
    notes: list[Note] = []
    for level in levels:
        for rule in sorted(level.rules, key=_rule_key):
            where = {"policy": rule.get("policy"), "level": level.level, "target": level.target}
            name = rule["filter"]
            meta = filters.get(name)
            if meta is None:
                notes.append(Note(name, "skipped", "filter is no longer registered", **where))
                continue
            ok, why = holds(rule.get("object_conds", ()))
            if not ok:
                notes.append(Note(name, "skipped", why, **where))
                continue
            if rule["verb"] == "delete":
                gone = entries.pop(name, None)
                reason = (f"DELETE at {level.level} {level.target} removes it" if gone
                          else "DELETE: nothing inherited to remove")
                notes.append(Note(name, "removed" if gone else "skipped", reason, **where))
                continue
            _replace_layout_owner(entries, meta, filters, notes, where)
            _merge(entries, meta, rule, where, notes)
    for entry in entries.values():
        # The filter's own defaulting (``FilterMetadata.with_defaults``, also that of
        # ``resolve_params``), not typing: resolution stays pure and total, so
        # ``explain`` shows a stored value the data path will refuse.
        entry.params = filters[entry.filter].with_defaults(entry.params)
    return list(entries.values()), notes


def match_object_conds(conds, request: RequestInfo,
                       object_types: Mapping[str, list[str]]) -> tuple[bool, str]:
    """Whether every ``TO`` condition holds for the request, and if not, which failed.

    Name and type patterns run on RE2 (``iostack.filters.regex``): linear in the
    name, whatever the pattern. One RE2 refuses (stored before patterns were
    checked with RE2) raises ``RegexError`` rather than skip the rule unseen.
    """
    for cond in conds:
        kind = cond["kind"]
        if request.obj is None:
            return False, f"TO {_cond_text(cond)}: not an object request"
        if kind == "type":
            patterns = object_types.get(cond["value"], [])
            if not any(_pattern_matches(p, request) for p in patterns):
                return False, f"object is not of type {cond['value']}"
        elif kind == "size":
            if request.size is None:
                return False, f"OBJECT_SIZE {cond['op']} {cond['value']}: size unknown"
            if not _compare(request.size, cond["op"], cond["value"]):
                return False, f"size {request.size} is not {cond['op']} {cond['value']}"
        elif kind == "age":
            if not _compare(request.age, cond["op"], cond["value"]):
                return False, (f"age {request.age:.0f} s is not {cond['op']} "
                               f"{cond['value']} s")
        elif kind == "tag":
            if request.tags.get(cond["key"]) != cond["value"]:
                return False, f"object tag {cond['key']} is not {cond['value']!r}"
        elif kind == "name":
            if not search(cond["value"], request.obj):
                return False, f"object name does not match {cond['value']!r}"
    return True, ""


def order_pipeline(entries: list[PipelineEntry],
                   filters: Mapping[str, FilterMetadata]) -> list[PipelineEntry]:
    """Stable topological order: explicit ORDER between ordered entries, else ``runs_before``.

    Among entries free to go next, ``ORDER n`` ones come first (by n), then the
    earliest set. A cycle in the metadata cannot stall it: what remains keeps
    its appearance order.
    """
    def before(a: PipelineEntry, b: PipelineEntry) -> bool:
        if a.order is not None and b.order is not None:
            return a.order < b.order
        return b.filter in filters[a.filter].runs_before

    pending = list(entries)
    ordered = []
    while pending:
        free = [e for e in pending if not any(before(o, e) for o in pending if o is not e)]
        pick = min(free or pending, key=lambda e: (e.order is None, e.order or 0,
                                                    pending.index(e)))
        pending.remove(pick)
        ordered.append(pick)
    return ordered


def _merge(entries, meta: FilterMetadata, rule, where, notes) -> None:
    name = meta.name
    entry = entries.get(name)
    source = {k: v for k, v in (("policy", where["policy"]), ("level", where["level"]),
                                ("target", where["target"]), ("rule", rule.get("id"))) if v}
    if entry is None:
        entry = PipelineEntry(name, {}, meta.default_stage, _sandboxed(meta))
        entries[name] = entry
        reason = "set here"
    else:
        named = sorted(rule.get("params", {}))
        reason = (f"overrides {', '.join(named)} of the inherited entry" if named
                  else "re-set here; inherited parameters kept")
    entry.params.update(rule.get("params", {}))
    if rule.get("stage"):
        entry.stage = rule["stage"]
    if rule.get("order") is not None:
        entry.order = rule["order"]
    if rule.get("methods"):
        entry.methods = tuple(rule["methods"])
    if rule.get("runtime"):
        entry.sandboxed = rule["runtime"] == "storlet"
    entry.sources.append(source)
    notes.append(Note(name, "applied", reason, **where))


def _replace_layout_owner(entries, meta: FilterMetadata, filters, notes, where) -> None:
    if not meta.layout_group:
        return
    for other in list(entries):
        if other != meta.name and filters[other].layout_group == meta.layout_group:
            del entries[other]
            notes.append(Note(other, "replaced",
                              f"{meta.name} set at {where['level']} {where['target']} owns the "
                              f"same stored layout ({meta.layout_group})", **where))


def _sandboxed(meta: FilterMetadata) -> bool:
    # Filters uploaded as code run as Storlets; library filters run natively
    # unless a policy says SANDBOXED.
    return meta.extra.get("runtime") == "storlet"


def _reverse_hint(meta: FilterMetadata, method: str) -> str:
    if method in ("GET", "HEAD") and meta.changes_size:
        return " (objects it stored are decoded from their sysmeta)"
    return ""


def _pattern_matches(pattern: str, request: RequestInfo) -> bool:
    if pattern.startswith(MIME_PREFIX):
        return bool(request.content_type) and search(pattern[len(MIME_PREFIX):],
                                                     request.content_type)
    return search(pattern, request.obj or "")


_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _compare(a, op: str, b) -> bool:
    return _OPS[op](a, b)


def _cond_text(cond) -> str:
    kind = cond["kind"]
    if kind in ("size", "age"):
        return f"OBJECT_{kind.upper()} {cond['op']} {cond['value']}"
    if kind == "tag":
        return f"OBJECT_TAG={cond['key']}:{cond['value']}"
    return f"OBJECT_{kind.upper()}{'=~' if kind == 'name' else '='}{cond['value']}"


def _rule_key(rule) -> tuple[int, int]:
    return rule.get("seq", 0), rule.get("index", 0)
