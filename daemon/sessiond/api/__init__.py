"""sessiond's protocol on the JSON-RPC layer: the methods, notifications and hooks of
protocol/README.md.

How a method is written (``session_methods.py`` is the model)::

    METHODS = MethodTable()

    @METHODS.request("session/setName", SetNameParams)
    def set_name(daemon: Daemon, ctx: RequestContext, params: SetNameParams) -> AppendedEntry:
        ...

- one module per group of methods (``session/*``, ``context/*``, ...), each with its
  ``METHODS`` table, bound to the daemon in ``app.build_daemon``;
- a handler is a module-level function of the daemon, the request's context and its
  params: it checks the params, calls one use case (``service``, or the store for a plain
  read) on the session ``daemon.on_session`` / ``daemon.ready`` hands it, and builds the
  result from ``types``; what it announces goes through ``notifications`` and
  ``summarizing`` (``$/progress``);
- its return annotation is the method's result type in ``protocol/schema.json``; a plain
  ``def`` answers inline, an ``async def`` runs as its own cancellable task;
- state lives with its owner: the session's in its ``SessionActor``, a connection's in
  its ``ClientState``; the ``Daemon`` holds only what every handler shares (the trusted
  settings, the connected clients, the open sessions).
"""
