"""The all-in-one stack (``iostack aio start|stop|status``, what ``make run`` runs).

``config`` (settings), ``secrets`` (generated credentials), ``swift`` (configs,
rings, devices), ``services`` (Redis/RabbitMQ/memcached: reuse or start),
``processes`` (pid files), ``stack`` (start/stop/status), ``session`` (a
running stack for tests and benchmarks), ``state`` (private files in the state
dir). Where the state dir and ``aio.json`` are found: ``iostack.endpoints``.
"""
