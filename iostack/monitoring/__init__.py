"""Workload metrics (ARCHITECTURE §3.7): counted in the servers, published to RabbitMQ, aggregated.

``middleware`` counts requests in proxies and object servers (``counters``)
and publishes a batch per interval through ``bus``; the controller feeds
the batches to an ``aggregator``, whose closed intervals drive the policy
actors (``iostack.controller.actors``). ``metric`` declares what a metric
is (name, kind, meaning), for the aggregator, the controller's registry and
the policy language alike. See ``docs/monitoring.md``.
"""
