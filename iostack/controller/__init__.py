"""The IOStack controller: policies from DSL text to enforced metadata.

- ``registry``: the vocabulary in Redis (filters, metrics, classes, groups, object types).
- ``compiler`` and ``store``: checked policies to rules, written atomically.
- ``resolve``: which filters apply to a request (shared by the data path and explain).
- ``reader``: the data path's cached, invalidated access to the rules.
- ``api``, ``auth``, ``openapi``, ``server``: the REST service; ``cli``, ``client``: its CLI.

Redis keys are listed in ``keys`` and ``docs/redis-keys.md``.
"""
