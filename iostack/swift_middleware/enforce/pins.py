"""Pinned filter code stays as it was uploaded: tenants cannot change or remove it.

Each upload of a filter's code is stored in the tenant's ``storlet``
container under a name derived from its content, ``iostack_pin_<hash>.py``
(``packaging.pinned_storlet_name``), and every object it encodes records that
name and the code's SHA-256: the object decodes with exactly that version, for
as long as it exists. The container is the tenant's own, so without a guard a
tenant's delete (or overwrite, or ``X-Delete-After``) of a version would make
its objects unreadable. This proxy check refuses, with 403, any write to a
pinned name (``PUT``, ``POST``, ``DELETE``; ``COPY`` arrives here as a
``PUT``, S3's and bulk deletes as ``DELETE``\\ s) except the reseller
admin's, which uploads versions and removes those no object uses
(``iostack filter rm``). The container itself cannot be deleted while it
holds them (Swift answers 409).
"""

from __future__ import annotations

from swift.common.swob import HTTPForbidden, Request

from iostack.storlet_runtime.host.packaging import PIN_PREFIX
from iostack.storlet_runtime.host.swift_conf import STORLET_CONTAINER

READS = ("GET", "HEAD", "OPTIONS")


def pin_write_refused(req: Request, container: str | None, obj: str | None
                      ) -> HTTPForbidden | None:
    """A 403 for a write to a pinned filter version by anyone but the reseller admin."""
    if (container != STORLET_CONTAINER or not obj or not obj.startswith(PIN_PREFIX)
            or req.method in READS or req.environ.get("reseller_request")):
        return None
    return HTTPForbidden(request=req, content_type="text/plain", body=(
        f"{obj} is a pinned filter version: objects decode with it, so it cannot be "
        "changed or removed (iostack filter rm removes versions no object uses)\n"))
