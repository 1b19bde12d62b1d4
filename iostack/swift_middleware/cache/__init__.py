"""The proxy-side cache of object heads on a fast directory (``docs/caching.md``).

``middleware`` is ``iostack_cache``; ``store`` keeps the entries on disk,
``worker`` fills them, ``admission`` says which rules cache what, and
``invalidation`` drops entries across proxies.
"""
