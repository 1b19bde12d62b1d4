"""The all-in-one stack (``iostack aio start|stop|status``, what ``make run`` runs).

``config`` (settings), ``secrets`` (generated credentials), ``swift`` (configs,
rings, devices), ``services`` (Redis/RabbitMQ/memcached: reuse or start),
``processes`` (pid files), ``stack`` (start/stop/status), ``session`` (a
running stack for tests and benchmarks), ``state`` (where ``aio.json`` lives).
"""
