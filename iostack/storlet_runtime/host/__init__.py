"""The storlet runtime's host side: what runs in the Swift servers, around the sandbox.

Modules of ``iostack.storlet_runtime.host``: ``gateway`` (the Storlets
gateway, entry point ``bwrap``), ``docker_gateway`` (the container-engine
gateway, entry point ``iostack_docker``) and ``container`` (what its
containers are made of), ``sandbox`` (a scope's bubblewrap command line,
start and tear-down), ``config`` (the gateway config's sandbox keys),
``identity`` (a scope's name and uid), ``cgroups``, ``channels`` (the
server's side of the SBus sockets), ``sbus_limits``, ``flock``, ``runner``
(a sandboxed filter run from inside a Swift middleware), ``packaging`` and
``deploy`` (library filters and tenant code as storlets in an account) and
``swift_conf`` (the Swift config sections that enable all this).

Nothing here runs inside the sandbox; the sandbox runs the modules directly in
``iostack.storlet_runtime``.
"""
