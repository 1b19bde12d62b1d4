"""Errors raised by filters.

The middleware maps them to HTTP statuses: a ``ParamError`` is the client's
or the policy's fault (4xx); an ``IntegrityError`` means the stored bytes are
not what the filter wrote (5xx, and never a body of garbage); a
``ConfigError`` is the operator's (5xx, logged).
"""

from __future__ import annotations


class FilterError(Exception):
    """Base class of every error a filter raises on purpose."""


class ParamError(FilterError, ValueError):
    """A filter parameter is missing, unknown or out of range."""

    def __init__(self, filter_name: str, param: str, reason: str) -> None:
        super().__init__(f"filter {filter_name!r}, parameter {param!r}: {reason}")
        self.filter_name = filter_name
        self.param = param
        self.reason = reason


class IntegrityError(FilterError):
    """Stored data is corrupt, truncated, tampered with or from another object."""


class FilterUnavailable(FilterError):
    """The filter cannot run for this request now (its sandbox refused it): a 503, not a 500."""


class ConfigError(FilterError):
    """The filter cannot run with this deployment's configuration (key file, cache dir)."""


class UnknownFilterError(FilterError, LookupError):
    """No filter of that name is registered."""
