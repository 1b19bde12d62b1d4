"""Sub-requests that reach again the very object a request addresses.

IOStack's middlewares read an object more than once within one request: the
decoding path fetches stored byte ranges, the proxy cache fills and
validates in the background, record selection reads by ranges. Each such
sub-request must land on the object the request itself reached, not on a
neighbour with a similar name:

- the path is ``PATH_INFO`` *quoted* (``make_subrequest`` unquotes it), so
  names with ``%``, ``?``, unicode and ``/`` survive the round trip;
- the query string goes along (``make_subrequest`` copies it), so a
  ``?version-id=`` read stays on that version;
- the backend headers that middlewares above set to address the object go
  along: Swift's object versioning rewrites a read of an old version (and
  every read through a versioned object's symlink) to a reserved name,
  ``/\\x00versions\\x00<container>/\\x00<object>\\x00<version>``, that the
  proxy refuses (412 "contains NULL") without
  ``X-Backend-Allow-Reserved-Names``; object servers need the storage
  policy index the proxy worked out.
"""

from __future__ import annotations

from collections.abc import Mapping

from swift.common.swob import Request, wsgi_quote
from swift.common.wsgi import make_subrequest

ALLOW_RESERVED_NAMES = "X-Backend-Allow-Reserved-Names"
POLICY_INDEX = "X-Backend-Storage-Policy-Index"
ADDRESSING_HEADERS = (ALLOW_RESERVED_NAMES, POLICY_INDEX)


def addressing_headers(req: Request) -> dict[str, str]:
    """The backend headers of ``req`` that say how to reach its object."""
    return {name: req.headers[name] for name in ADDRESSING_HEADERS if name in req.headers}


def object_subrequest(req: Request, method: str, swift_source: str,
                      headers: Mapping[str, str] | None = None) -> Request:
    """A ``method`` sub-request of the object ``req`` addresses, with ``headers`` added."""
    return make_subrequest(req.environ, method=method, path=wsgi_quote(req.path_info),
                           headers={**addressing_headers(req), **(headers or {})},
                           swift_source=swift_source)
