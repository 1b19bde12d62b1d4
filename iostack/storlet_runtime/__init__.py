"""Sandboxed filters: the real Storlets stack with a bubblewrap runtime, by where code runs.

The modules directly in this package run inside the sandbox, on the system
Python with the standard library, Storlets' agent and the filter library
(``tests/unit/storlet_runtime/test_sandbox_side_imports.py`` checks it):

- ``agent``: the sandbox's first program (a log socket, then the agent);
- ``daemon_factory`` and ``daemon``: Storlets' daemon factory and the
  pre-forking Python storlet daemon it starts;
- ``filter_runner``: runs an ``iostack.filters`` filter for the storlet
  ``host.packaging`` generates;
- ``storlets_api``: runs a plain Storlets-API storlet as an IOStack filter;
- ``sdk``: the base class tenants write their filters against;
- ``pipes``: the pieces bodies cross the pipes in (the host's gateway uses it too).

Stored storlet code imports ``filter_runner``, ``storlets_api`` and ``sdk`` by
these dotted names (and objects record the SHA-256 of that code), so they stay
where they are. ``storlets/`` holds storlets shipped as files; ``native/``
the C sources of the sandbox's seccomp program.

``host`` is what runs in the Swift servers around the sandbox (the gateways,
the sandbox's start, packaging and deploying storlets); ``tools`` is what
admins and tenants run (``iostack storlet ...``, trial runs, the container
image). Importing ``host.gateway`` monkey-patches the process with eventlet
(Storlets' runtime module does so on import); the other modules do not. See
docs/storlets.md.
"""
