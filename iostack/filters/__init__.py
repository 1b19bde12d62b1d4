"""The IOStack filter library.

``library`` lists the built-in filters (``builtin_metadata()``,
``get_filter(name)``); ``base`` holds the streaming contract the data path
drives (encoders on PUT, Range-capable views on GET); ``errors`` the error
classes it maps to HTTP statuses; ``tenant_keys`` the encryption key provider. Each
filter is one module: ``noop``, ``compression``, ``encryption``, ``caching``.
``regex`` is not a filter: it compiles, with RE2, the patterns policies match
object names and types with (the DSL and the resolution share it).
See docs/filters.md.
"""
