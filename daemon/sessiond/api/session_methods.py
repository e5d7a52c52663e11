"""``session/*``: opening, creating, listing, appending, reading the tree, forking."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from sessiond.core.entries import Entry
from sessiond.errors import (
    InvalidParamsError,
    LimitExceededError,
)
from sessiond.jsonrpc import AnswerLater, RequestContext
from sessiond.paths import allowed_client_path, check_allowed, default_session_dir
from sessiond.service.actor import SessionActor
from sessiond.service.creating import create_session
from sessiond.service.forking import fork_job, user_messages_for_forking
from sessiond.service.pruned_originals import original_lookup
from sessiond.service.usage import context_usage
from sessiond.service.workers import in_worker
from sessiond.store.listing import list_sessions
from sessiond.store.records import EntryRecord
from sessiond.store.rewriting import rewrite_title
from sessiond.store.session import SessionStore

from .daemon import Daemon
from .methods import MethodTable
from .notification_types import SessionRecovered
from .notifications import announce_change
from .tree_view import tree_result
from .types import (
    NO_LEAF,
    AppendedEntry,
    AppendParams,
    AppendResult,
    CloseResult,
    EntriesParams,
    EntriesResult,
    EntryParams,
    EntryResult,
    ForkParams,
    ForkResult,
    LabelParams,
    ListSessionsParams,
    ListSessionsResult,
    NewSessionParams,
    NewSessionResult,
    OpenSessionParams,
    OpenSessionResult,
    PathParams,
    PathResult,
    SessionRef,
    SetNameParams,
    TreeParams,
    TreeResult,
    UserMessagesResult,
)

METHODS = MethodTable()


def _check_answer_size(store: SessionStore, records: list[EntryRecord]) -> None:
    """An answer holds at most as many bytes of entries as the session itself: an id named
    many times over a big entry must not make an answer (and a daemon) out of proportion
    to what the session holds."""
    asked = sum(record.length for record in records)
    if asked > store.byte_size:
        raise LimitExceededError(
            f"session/entries: these {len(records)} ids name {asked} bytes of entries, more "
            f"than the session's {store.byte_size} (an id named again counts again); ask "
            "for fewer",
            limit="answerBytes",
            maximum=store.byte_size,
        )


@METHODS.request("session/new", NewSessionParams)
def new_session(daemon: Daemon, ctx: RequestContext, params: NewSessionParams) -> NewSessionResult:
    actor = create_session(
        daemon.sessions,
        ctx.connection.id,
        daemon.settings(ctx).storage,
        cwd=params.cwd,
        session_dir=params.session_dir,
        path=params.path,
        session_id=params.id,
        parent_session=params.parent_session,
    )
    if params.write_now:
        actor.store.write_now()
    return NewSessionResult(
        session_id=actor.session_id,
        path=str(actor.store.path),
        header=actor.store.header,
        persisted=actor.store.persisted,
    )


@METHODS.request("session/open", OpenSessionParams)
async def open_session(
    daemon: Daemon, ctx: RequestContext, params: OpenSessionParams
) -> OpenSessionResult:
    storage = daemon.settings(ctx).storage
    path = allowed_client_path(params.path, "path", storage.allowed_roots)
    # The file is read in a worker thread: other clients are served meanwhile (a
    # client's own opens and listings, a few at a time).
    async with daemon.client(ctx).file_jobs:
        actor, opened = await daemon.sessions.open(path, ctx.connection.id, storage)
    if not actor.ready_now():
        await actor.catch_up()  # joined an open session another program wrote to
    store = actor.store
    recovery = None if store.recovery.clean else store.recovery
    if opened and recovery is not None:
        # To the opener only: a client that joined the same open gets it in its result.
        daemon.clients.publish(
            {ctx.connection.id},
            "session/recovered",
            SessionRecovered(session_id=actor.session_id, path=str(store.path), recovery=recovery),
        )
    return OpenSessionResult(
        session_id=actor.session_id,
        path=str(store.path),
        header=store.header,
        leaf_id=store.leaf_id,
        entry_count=store.entry_count,
        name=store.name,
        recovery=recovery,
        dialect=store.dialect.name,
    )


@METHODS.request("session/list", ListSessionsParams)
async def list_session_files(
    daemon: Daemon, ctx: RequestContext, params: ListSessionsParams
) -> ListSessionsResult:
    settings = daemon.settings(ctx)
    roots = settings.storage.allowed_roots
    if params.session_dir:
        directory = allowed_client_path(params.session_dir, "sessionDir", roots)
    elif params.cwd:
        directory = default_session_dir(params.cwd, settings.storage.session_dir)
    else:
        raise InvalidParamsError("session/list needs cwd or sessionDir")
    check_allowed(directory, roots)
    # Every file of the directory is scanned: in a worker thread, as for session/open.
    async with daemon.client(ctx).file_jobs:
        return ListSessionsResult(sessions=await in_worker(list_sessions, directory))


@METHODS.request("session/close", SessionRef)
def close_session(daemon: Daemon, ctx: RequestContext, params: SessionRef) -> CloseResult:
    daemon.actor(params.session_id).store.sync()
    return CloseResult(closed=daemon.sessions.close(params.session_id, ctx.connection.id))


@METHODS.request("session/append", AppendParams)
def append_entries(daemon: Daemon, ctx: RequestContext, params: AppendParams) -> AppendResult:
    def work(actor: SessionActor) -> AppendResult:
        expected = params.expected_leaf_id
        entries = (
            actor.store.append_entries(params.entries)
            if expected is None
            else actor.store.append_entries(
                params.entries, expected_leaf_id=None if expected == NO_LEAF else expected
            )
        )
        actor.appended(entries)
        ids = [entry.id for entry in entries]
        if ids:
            announce_change(actor, "append", ids)
        return AppendResult(
            ids=ids,
            leaf_id=actor.store.leaf_id,
            usage=context_usage(actor, daemon.settings(ctx, actor), None),
        )

    return daemon.on_session(params.session_id, work)


@METHODS.request("session/entries", EntriesParams)
def read_entries(daemon: Daemon, ctx: RequestContext, params: EntriesParams) -> EntriesResult:
    def work(actor: SessionActor) -> EntriesResult:
        store = actor.store
        if params.ids is not None:
            records = [store.record(entry_id) for entry_id in params.ids]
            _check_answer_size(store, records)
        else:
            if params.offset < 0 or (params.limit is not None and params.limit < 0):
                raise InvalidParamsError("offset and limit must not be negative")
            end = None if params.limit is None else params.offset + params.limit
            records = list(store.records()[params.offset : end])
        return EntriesResult(
            entries=[msgspec.Raw(store.raw_line(r)) for r in records], total=store.entry_count
        )

    return daemon.on_session(params.session_id, work)


@METHODS.request("session/entry", EntryParams)
def read_entry(daemon: Daemon, ctx: RequestContext, params: EntryParams) -> EntryResult:
    if params.original:
        raise AnswerLater(_read_original(daemon, ctx, params))

    def work(actor: SessionActor) -> EntryResult:
        store = actor.store
        return EntryResult(entry=msgspec.Raw(store.raw_line(store.record(params.entry_id))))

    return daemon.on_session(params.session_id, work)


async def _read_original(daemon: Daemon, ctx: RequestContext, params: EntryParams) -> EntryResult:
    actor = await daemon.ready(params.session_id)
    lookup = original_lookup(actor.store, params.entry_id)
    if lookup.from_archive is None:
        return EntryResult(entry=msgspec.Raw(lookup.line), from_archive=False)
    # The archive holds every output pruned so far: read in a worker thread, a client's
    # few at a time, as opens are.
    async with daemon.client(ctx).file_jobs:
        original = await in_worker(lookup.from_archive)
    return EntryResult(entry=msgspec.Raw(original), from_archive=True)


@METHODS.request("session/path", PathParams)
def read_path(daemon: Daemon, ctx: RequestContext, params: PathParams) -> PathResult:
    def work(actor: SessionActor) -> PathResult:
        store = actor.store
        records = store.path_records(params.from_id)
        return PathResult(entries=[msgspec.Raw(store.raw_line(r)) for r in records])

    return daemon.on_session(params.session_id, work)


@METHODS.request("session/tree", TreeParams)
def read_tree(daemon: Daemon, ctx: RequestContext, params: TreeParams) -> TreeResult:
    return daemon.on_session(
        params.session_id, lambda actor: tree_result(actor.store, previews=params.previews)
    )


def _append_one(
    daemon: Daemon, session_id: str, write: Callable[[SessionStore], Entry]
) -> AppendedEntry:
    def work(actor: SessionActor) -> AppendedEntry:
        written = write(actor.store)
        actor.appended([written])
        announce_change(actor, "append", [written.id])
        return AppendedEntry(entry_id=written.id, leaf_id=actor.store.leaf_id)

    return daemon.on_session(session_id, work)


@METHODS.request("session/label", LabelParams)
def set_label(daemon: Daemon, ctx: RequestContext, params: LabelParams) -> AppendedEntry:
    return _append_one(
        daemon, params.session_id, lambda store: store.append_label(params.target_id, params.label)
    )


@METHODS.request("session/setName", SetNameParams)
async def set_name(daemon: Daemon, ctx: RequestContext, params: SetNameParams) -> AppendedEntry:
    if not params.name.strip():
        # pi refuses an empty name here (a session_info entry can still clear it)
        raise InvalidParamsError("name must not be empty", name=params.name)
    try:
        named = _append_one(
            daemon,
            params.session_id,
            lambda store: store.set_name(params.name, rewrite_apart=True),
        )
    except AnswerLater as later:
        named = await later.pending
    actor = daemon.actor(params.session_id)
    if actor.store.title_pending:
        # An oh-my-pi title line that is not 256 bytes: the file is rewritten with the new
        # one, in a worker thread, alone on the file (as pruning rewrites it).
        await actor.exclusive(lambda: _rewrite_title(actor.store))
    return named


async def _rewrite_title(store: SessionStore) -> None:
    plan = store.plan_title()
    if plan is not None:
        store.take_title(plan, await in_worker(rewrite_title, plan))


@METHODS.request("session/fork", ForkParams)
async def fork_session(daemon: Daemon, ctx: RequestContext, params: ForkParams) -> ForkResult:
    client = daemon.client(ctx)
    selected: list[str] = []

    def prepare(actor: SessionActor) -> Callable[[], SessionStore]:
        daemon.sessions.check_room(ctx.connection.id)
        job = fork_job(actor.store, params.entry_id)
        selected.append(job.selected_text)
        return job.make

    actor = daemon.actor(params.session_id)
    # The copy is file work of the size of the path: in a worker thread.
    async with client.file_jobs:
        store = await actor.file_job(prepare)
    forked = daemon.sessions.adopt(store, ctx.connection.id)
    return ForkResult(
        session_id=forked.session_id,
        path=str(forked.store.path),
        selected_text=selected[0],
    )


@METHODS.request("session/userMessages", SessionRef)
def user_messages(daemon: Daemon, ctx: RequestContext, params: SessionRef) -> UserMessagesResult:
    def work(actor: SessionActor) -> UserMessagesResult:
        found = user_messages_for_forking(actor.store)
        return UserMessagesResult(messages=[{"entryId": i, "text": t} for i, t in found])

    return daemon.on_session(params.session_id, work)
