"""The size limit of an SBus message, checked before a request reaches a sandbox.

``sbus.c`` receives every datagram into a 4096-byte buffer: three integer
lengths, then the JSON of the file descriptors' metadata (which carries the
object's user metadata) and the JSON of the command and its parameters. A
larger execute message makes the storlet daemon crash, so one request with a
big parameter would take a tenant's storlet down: the gateway measures the
message first and answers ``400`` instead.
"""

from __future__ import annotations

from typing import Any

from storlets.sbus import command as sbus_cmd
from storlets.sbus import file_description as sbus_fd
from storlets.sbus.datagram import SBusFileDescriptor, build_datagram

SBUS_MAX_MESSAGE = 4096
SBUS_HEADER = 3 * 4


def execute_message_size(sreq: Any, storlet_dir: str) -> int:
    """Bytes of the SBus execute message ``sreq`` will produce.

    Mirrors the descriptors ``StorletInvocationProtocol`` sends; fd numbers
    travel out of band, so placeholders do not change the size.
    """
    params = dict(sreq.params)
    params["storlet_execution_path"] = storlet_dir
    range_md = {"start": str(sreq.start), "end": str(sreq.end)} if sreq.has_range else {}
    sfds = [
        SBusFileDescriptor(sbus_fd.SBUS_FD_SERVICE_OUT, -1),
        SBusFileDescriptor(sbus_fd.SBUS_FD_INPUT_OBJECT, -1,
                           storage_metadata=sreq.data.user_metadata, storlets_metadata=range_md),
        SBusFileDescriptor(sbus_fd.SBUS_FD_OUTPUT_OBJECT, -1),
        SBusFileDescriptor(sbus_fd.SBUS_FD_OUTPUT_OBJECT_METADATA, -1),
        SBusFileDescriptor(sbus_fd.SBUS_FD_LOGGER, -1),
    ]
    sfds += [SBusFileDescriptor(sbus_fd.SBUS_FD_INPUT_OBJECT, -1,
                                storage_metadata=extra.user_metadata)
             for extra in sreq.extra_data_list]
    datagram = build_datagram(sbus_cmd.SBUS_CMD_EXECUTE, sfds, params, None)
    return (SBUS_HEADER + len(datagram.serialized_metadata.encode())
            + len(datagram.serialized_cmd_params.encode()))
