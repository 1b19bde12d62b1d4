"""IOStack: policy-driven software-defined storage for OpenStack Swift and iSCSI volumes.

``iostack.select(container, prefix, ...)`` reads objects through the
storage-side record filters into a ``pyarrow.Table`` (``iostack.select_client``).
"""

from typing import Any

# The release, as semantic versioning writes it; pyproject.toml reads it from here.
__version__ = "0.1.0"


def select(*args: Any, **kwargs: Any) -> Any:
    """``iostack.select_client.select``: imported on first use (pyarrow is not needed to
    import the rest of IOStack)."""
    from iostack.select_client import select as client_select

    return client_select(*args, **kwargs)
