"""Who may log in to the block bridge's iSCSI targets.

Every target the bridge exports (tgt or LIO) requires CHAP with the
bridge's account and accepts only the initiator names listed in its
config: no target is open to every initiator that reaches the portal. The
service config holds ``chap_user``, ``chap_password`` and ``initiators``;
``write_config`` (and the all-in-one, which records them in ``aio.json``)
generates them.

An initiator logs in with that initiator name and CHAP pair, for example
libiscsi tools with ``-i <initiator>`` (``iscsi-rw -i``) and the account in
``LIBISCSI_CHAP_USERNAME`` / ``LIBISCSI_CHAP_PASSWORD`` (``initiator_env``),
which keeps the password out of their argv.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

# RFC 3720 iSCSI names as the bridge accepts them: iqn.YYYY-MM.reversed.domain[:anything].
IQN_RE = re.compile(r"^iqn\.\d{4}-\d{2}\.[a-z0-9.-]+(?::[a-z0-9.:-]+)?$")
# tgt and LIO store CHAP credentials as plain words; keep them to such characters.
CHAP_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class AccessError(ValueError):
    """Unusable iSCSI access settings."""


@dataclass(frozen=True)
class IscsiAccess:
    chap_user: str
    chap_password: str
    initiators: tuple[str, ...]

    def __post_init__(self) -> None:
        if not CHAP_RE.match(self.chap_user):
            raise AccessError("chap_user must be 1-64 letters, digits, '_', '.' or '-'")
        # RFC 3720 asks for at least 12 bytes of secret; LIO and tgt take up to 255.
        if not CHAP_RE.match(self.chap_password) or len(self.chap_password) < 12:
            raise AccessError("chap_password must be 12-64 letters, digits, '_', '.' or '-'")
        if not self.initiators or not all(IQN_RE.match(i) for i in self.initiators):
            raise AccessError("initiators must list at least one initiator IQN "
                              "(lower case, iqn.YYYY-MM.domain[:name])")

    @classmethod
    def generate(cls, iqn_prefix: str) -> IscsiAccess:
        """Fresh credentials and one initiator name under ``iqn_prefix``."""
        return cls("iostack", secrets.token_hex(12),
                   (f"{iqn_prefix}:initiator.{secrets.token_hex(4)}",))

    def initiator_env(self) -> dict[str, str]:
        """Environment for libiscsi initiators: the CHAP pair, never in argv."""
        return {"LIBISCSI_CHAP_USERNAME": self.chap_user,
                "LIBISCSI_CHAP_PASSWORD": self.chap_password}
