"""Creating a session: where its file may go, and the new session registered open."""

from __future__ import annotations

from sessiond.errors import ConflictError, NotAllowedError
from sessiond.paths import allowed_client_path, check_allowed, default_session_dir
from sessiond.settings import StorageSettings
from sessiond.store.session import SessionStore

from .actor import ClientId, SessionActor
from .sessions import SessionRegistry


def create_session(
    sessions: SessionRegistry,
    client: ClientId,
    storage: StorageSettings,
    *,
    cwd: str,
    session_dir: str | None = None,
    path: str | None = None,
    session_id: str | None = None,
    parent_session: str | None = None,
) -> SessionActor:
    """A new session of ``cwd``, open for ``client``: at ``path``, in ``session_dir``, or
    in the configured directory for ``cwd``; refused outside ``storage.allowedRoots``
    and at the path of a session already open.

    Runs on the event loop: nothing is read (a stat, the directory, the lock), and a
    client may send requests for the new id right behind it."""
    roots = storage.allowed_roots
    if path:
        already = sessions.find_by_path(allowed_client_path(path, "path", roots))
        if already is not None:
            raise ConflictError(
                f"{path} is already open as session {already.session_id}",
                path=str(already.store.path),
                sessionId=already.session_id,
            )
    if roots is not None and not path and not session_dir:
        # The default directory: refuse before SessionStore.create makes it.
        check_allowed(default_session_dir(cwd, storage.session_dir), roots)

    def make() -> SessionStore:
        store = SessionStore.create(
            cwd,
            session_dir=allowed_client_path(session_dir, "sessionDir", roots)
            if session_dir
            else None,
            path=allowed_client_path(path, "path", roots) if path else None,
            session_id=session_id,
            parent_session=parent_session,
            storage=storage,
        )
        try:
            check_allowed(store.path, roots)
        except NotAllowedError:
            store.close()
            raise
        return store

    return sessions.create(make, client, session_id)
