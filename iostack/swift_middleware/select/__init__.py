"""Storage-side selection: projection and predicates run next to the data (``docs/spark.md``).

``proxy`` and ``object`` are the middlewares (``iostack_select``,
``iostack_select_object``); ``engine`` and ``parquet`` select, ``frames`` frames the answer.
"""
