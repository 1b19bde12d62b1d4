"""The block bridge: IOStack's filter stack on block volumes.

The data path is C (``native/``): libiostack runs a stack of filter ``.so``
files written to the Konnector filter ABI, each volume with private filter
instances, under three frontends (a tcmu-runner handler for LIO/TCMU, a
FUSE file exported by tgt over iSCSI, an nbdkit plugin). The Python modules
manage it:

- ``native_lib``: ctypes access to libiostack (spec validation, stacks in tests)
- ``processes``, ``tgt``, ``frontends``: tgtd, FUSE and nbdkit daemons by pid
- ``volumes``: filtered volumes (check, build, roll back, persist)
- ``initiator``, ``rpc``, ``service``: the JSON-RPC 2.0 API on TCP 18700
- ``catalog``, ``groups``: block filter metadata for the controller, policy
  pipelines compiled into stack specs, storage groups

See docs/block_bridge.md.
"""
