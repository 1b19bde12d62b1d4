"""Sandboxed filters: the real Storlets stack with a bubblewrap runtime.

``gateway`` is the Storlets gateway (entry point ``bwrap``) whose per-scope
sandbox is started by ``sandbox``; ``swift_conf`` configures Swift for it;
``deploy`` and ``packaging`` turn tenant code and sandbox-capable library
filters into storlets; ``filter_runner`` runs inside the sandbox; ``cli``
offers ``iostack storlet ...``. See docs/storlets.md.

Importing ``gateway`` monkey-patches the process with eventlet (Storlets'
runtime module does so on import); the other modules do not.
"""
