"""Policies over data already stored: what objects went through, and what a policy would do.

- ``swift_access``: Swift's internal clients over a host's Swift config (stored
  form and records as the object servers hold them; the tenant's view through
  IOStack's own proxy middleware);
- ``inspect``: one object's filter records, logical and stored bytes, and
  whether today's policy would store it differently (``iostack object inspect``);
- ``usage``: logical vs stored bytes per tenant and container (``iostack usage``);
- ``scan``: the objects a target covers, with their stored headers;
- ``simulate``: what a policy would do to them (``iostack policy simulate``);
- ``cli``: those verbs.

Like Swift's own admin tools (``swift-object-info``, the container
reconciler), these run where the Swift configs and rings are (a proxy host,
or the all-in-one), and ask the controller only for policies.
"""
