"""The IOStack filter library.

``library`` lists the built-in filters (``builtin_metadata()``,
``get_filter(name)``); ``base`` holds the streaming contract the data path
drives (encoders on PUT, Range-capable views on GET); ``metadata`` what a
filter declares; ``errors`` the error classes it maps to HTTP statuses;
``catalogs`` the filters other components ship; ``offload`` CPU-heavy work off
the event loop; ``tenant_keys`` the encryption key provider; ``records``,
``csv_where`` and ``output`` the line records, row predicates and answer
formats the record filters and the select middleware share. The filters
themselves are the modules of ``iostack.filters.builtin``, one each.
``regex`` is not a filter: it compiles, with RE2, the patterns policies match
object names and types with (the DSL and the resolution share it).
See docs/filters.md.
"""
