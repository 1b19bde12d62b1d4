"""RE2 for the regular expressions that tenants and admins supply.

Policies match object names (``TO OBJECT_NAME=~regex``) and object types
(patterns registered per type, ``mime:`` ones against the Content-Type) on
every request. Python's ``re`` backtracks: ``(a+)+$`` against a long name
takes exponential time, a proxy worker stuck per request. RE2 (PyPI
``google-re2``, the engine ``grep`` already runs through pyarrow) matches in
time linear in the text, and refuses what it cannot do that way
(backreferences, look-around): such a pattern is refused when a policy or an
object type is written, with the reason, never when a request meets it.

- ``compile_regex(pattern)``: the compiled pattern, or ``RegexError`` saying
  why not. Compiled patterns are kept in an LRU of ``CACHE_SIZE``, so the data
  path compiles a policy's pattern once, not per request.
- ``search(pattern, text)``: whether the pattern matches anywhere in ``text``.

Compiling is bounded too: patterns longer than ``MAX_PATTERN_BYTES`` are
refused, and RE2 refuses programs larger than ``MAX_PROGRAM_MEMORY``
(``a{1000}{1000}``). Syntax is RE2's (``\\z`` for the very end, not ``\\Z``).

This module sits in ``iostack.filters`` because both the DSL and the
controller's resolution already import it, and it imports nothing of theirs.
"""

from __future__ import annotations

import functools

import re2

CACHE_SIZE = 512
MAX_PATTERN_BYTES = 1024
MAX_PROGRAM_MEMORY = 1 << 20  # bytes RE2 may use for one compiled pattern


class RegexError(ValueError):
    """A pattern RE2 does not accept; the message says why."""


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_PROGRAM_MEMORY
    options.log_errors = False  # the reason reaches the caller in RegexError, not stderr
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_regex(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2; ``RegexError`` names what RE2 rejects."""
    try:
        size = len(pattern.encode("utf-8"))
    except UnicodeEncodeError:
        raise RegexError("the pattern is not valid text (a lone surrogate)") from None
    if size > MAX_PATTERN_BYTES:
        raise RegexError(f"the pattern is {size} bytes, more than {MAX_PATTERN_BYTES} "
                         f"(MAX_PATTERN_BYTES)")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "rejected"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexError(f"not a valid RE2 regular expression: {reason}") from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (RE2 syntax) matches anywhere in ``text``."""
    return compile_regex(pattern).search(text) is not None
