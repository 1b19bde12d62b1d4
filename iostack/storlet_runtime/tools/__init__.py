"""The storlet runtime's tools: commands and checks run by admins and tenants, not by Swift.

Modules of ``iostack.storlet_runtime.tools``: ``cli`` (``iostack storlet ...``
and the verbs it lends to ``iostack filter``), ``upload_check`` (an uploaded
filter's trial run), ``local`` (a sandbox on this host with no stack, for
``iostack filter test``), ``template`` (what ``iostack filter new`` writes),
``version_usage`` (which objects use which uploaded version), ``engine_image`` and
``engine_seccomp`` (the container runtime's image and seccomp profile, built
when a stack or an operator sets an engine up).
"""
