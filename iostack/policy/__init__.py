"""The contract between the control plane and the data plane.

The controller (``iostack.controller``) writes policies into Redis; the Swift
middleware (``iostack.swift_middleware``) and the monitoring middleware read
them on every request. Both import this package and nothing of each other:

- ``redis_keys``: the Redis key names, under one prefix (schema in ``docs/redis-keys.md``);
- ``resolve``: the compiled-rule format as the data path reads it (``Level``,
  ``RequestInfo``) and the resolution of a request's rules into an ordered
  filter pipeline (``Resolution``), for objects and for volumes;
- ``reader``: the data path's reader: every lookup answered from a local,
  versioned copy of the policy state kept current in the background, so no
  request waits for Redis; ``PolicyStoreUnavailable`` only on a node that
  never held a version;
- ``snapshot``: that copy: read whole from Redis in one Lua call, and kept
  on the node's disk (checksummed, replaced atomically);
- ``connection``: ``connect(url)`` for every Redis client (``redis://``,
  ``rediss://``, ``redis+sentinel://``), with bounded timeouts;
- ``changes``: how a change reaches every cache (the controller's ``announce``,
  the data path's ``Subscription``);
- ``view``: one view of a Swift request (decoded names, the containers whose
  rules apply, authorization) and its memoized lookup and resolution; the
  controller's ``explain`` builds the same view.
"""
