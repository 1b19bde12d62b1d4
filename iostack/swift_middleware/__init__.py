"""IOStack's Swift middleware: where policies meet tenants' requests (``docs/datapath.md``).

Grouped by feature, as Swift groups ``crypto/``:

- ``enforce/``: policy enforcement. ``proxy`` (``iostack_proxy``) encodes on
  PUT and decodes on GET/HEAD, ``object`` (``iostack_object``) runs filters
  staged ``ON OBJECT`` on the object servers; ``record``, ``encode``,
  ``decode``, ``source``, ``sandboxed`` and ``sandbox_object`` are their
  shared pieces.
- ``select/``: storage-side selection (S3 Select-like). ``proxy``
  (``iostack_select``) and ``object`` (``iostack_select_object``) are the
  middlewares, ``engine`` and ``parquet`` run a selection, ``frames`` frames
  its answer.
- ``cache/``: the proxy-side cache of object heads. ``middleware``
  (``iostack_cache``), ``worker`` (fills), ``policy`` (which rules cache),
  ``invalidation`` (across proxies), ``store`` (the entries on disk).
- ``qos`` (``iostack_qos``): bandwidth and operation-rate shaping.
- ``shared_reader``: one policy reader per worker process, shared by the above.
- ``streams``: response-body helpers they share.

The request view and the policy reader they share are in ``iostack.policy``.
"""
