"""The IOStack controller: policies from DSL text to enforced metadata.

- ``registry``: the vocabulary in Redis (filters, metrics, classes, groups, object types).
- ``compiler`` and ``policy_store``: checked policies to rules, written atomically;
  ``history``: every change, diff and rollback.
- ``actors``, ``control_loop``, ``qos``, ``guardian``: dynamic policies and SLOs.
- ``api``, ``auth``, ``openapi``, ``server``: the REST service; ``ui``: the
  console; ``cli``, ``client``, ``formatting``: the CLI.

Which filters apply to a request (``iostack.policy.resolve``) and the data
path's cached reader (``iostack.policy.reader``) are the policy contract's,
shared with the data path. Redis keys are listed in ``iostack.policy.redis_keys``
and ``docs/redis-keys.md``.
"""
