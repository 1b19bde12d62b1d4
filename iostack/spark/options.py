"""The data source's options (``spark.read.format("iostack").option(...)``), checked.

What each option means: ``iostack.spark.datasource``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from iostack.select_client import FILTERS

DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
FORMATS = FILTERS  # the storage-side record filter of each object format


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"iostack: option {name}={value!r} is not true or false")


@dataclass(frozen=True)
class Settings:
    """The data source's options, checked."""

    container: str
    prefix: str = ""
    header: bool = True
    format: str = "csv"  # csv, parquet or json (JSON Lines)
    answer: str = "arrow"  # the storage side's answer format: arrow, or csv (CSV objects)
    split_size: int = DEFAULT_SPLIT_SIZE
    pushdown: bool = True
    push_double: bool = True
    timeout: float = 60.0
    auth_url: str | None = None
    user: str | None = None
    key: str | None = field(default=None, repr=False)  # a secret: never in a repr
    storage_url: str | None = None
    token: str | None = field(default=None, repr=False)
    user_agent: str = "iostack-spark"  # names the job's requests in the proxy's access log
    stage: str | None = None  # where the storage side selects: proxy, object, or its default

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Settings:
        container = options.get("container")
        if not container:
            raise ValueError("iostack: the option 'container' is required")
        split_size = int(options.get("split_size", DEFAULT_SPLIT_SIZE))
        if split_size <= 0:
            raise ValueError(f"iostack: split_size must be positive, got {split_size}")
        settings = cls(
            container=container,
            prefix=options.get("prefix", "") or "",
            header=_bool(options, "header", True),
            format=(options.get("format") or "csv").strip().lower(),
            answer=(options.get("answer") or "arrow").strip().lower(),
            split_size=split_size,
            pushdown=_bool(options, "pushdown", True),
            push_double=_bool(options, "push_double", True),
            timeout=float(options.get("timeout", 60)),
            auth_url=options.get("auth_url"),
            user=options.get("user"),
            key=options.get("key"),
            storage_url=options.get("storage_url"),
            token=options.get("token"),
            user_agent=options.get("user_agent") or "iostack-spark",
            stage=options.get("stage") or None,
        )
        if settings.format not in FORMATS:
            raise ValueError(f"iostack: format must be one of {', '.join(FORMATS)}, "
                             f"got {settings.format!r}")
        if settings.answer not in ("arrow", "csv") or (
                settings.answer == "csv" and settings.format != "csv"):
            raise ValueError(f"iostack: answer must be arrow, or csv for CSV objects, "
                             f"got {settings.answer!r}")
        if settings.stage not in (None, "proxy", "object"):
            raise ValueError(f"iostack: stage must be proxy or object, got {settings.stage!r}")
        if not (settings.storage_url and settings.token) and not (
                settings.auth_url and settings.user and settings.key):
            raise ValueError("iostack: give auth_url, user and key, or storage_url and token")
        return settings
