"""Python storlets shipped with IOStack, uploaded as files to a tenant's storlet container.

Each module here is a self-contained storlet (standard library only): the
sandbox imports it by file name, never through the ``iostack`` package.
"""
