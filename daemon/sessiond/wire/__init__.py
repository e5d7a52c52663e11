"""Values the session file, the daemon and its clients share, as msgspec types.

The lowest layer: it imports nothing of sessiond and does no I/O. What the store and
the service produce and the protocol carries as it is (a recovery report, a line of a
listing, a compaction's result, how full a context is) is defined here once, so that
``api.types`` can build the protocol's params and results without importing the store
or the service. The session file's own entry and message types are ``core.entries`` and
``core.messages``.
"""
