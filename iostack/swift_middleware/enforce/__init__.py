"""Policy enforcement on the data path: the filters a policy sets, run on PUT and undone on GET.

``proxy`` and ``object`` are the middlewares (``iostack_proxy``,
``iostack_object``); see ``iostack.swift_middleware`` and ``docs/datapath.md``.
"""
