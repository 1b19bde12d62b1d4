"""IOStack's Swift middleware: where policies meet tenants' requests (``docs/datapath.md``).

``proxy`` enforces policies on the proxy (encode on PUT, decode on GET/HEAD),
``object`` runs filters staged ``ON OBJECT`` on the object servers, ``cache``
is the proxy-side cache; ``record``, ``encode``, ``decode``, ``source`` and
``sandboxed`` are their shared pieces, ``policies`` the per-worker policy reader.
"""
