"""The built-in filters, one module each: what ``iostack.filters.library`` lists by name.

Each filter module declares ``METADATA`` and ``SPEC`` against the contract in
``iostack.filters`` (``base``, ``metadata``, ``errors``): ``noop``,
``compression``, ``encryption``, ``caching``, ``bandwidth``, ``expiry`` and
the record filters ``csv_select``, ``json_select``, ``parquet_select`` and
``grep``. Two modules here are not filters but bound what a hostile object
makes a worker do for one: ``json_depth`` (nesting, before ``json_select``
parses) and ``parquet_decode`` (``parquet_select``'s decoding in a bounded
child process). The filters run in the Swift servers and, when sandboxable,
inside the Storlets sandbox too.
"""
