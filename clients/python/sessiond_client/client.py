"""``SessiondClient``: one typed method per daemon request.

Arguments are keywords named as in Python (``expected_leaf_id``), sent camelCase
(``expectedLeafId``) through the daemon's own params Structs; optional arguments left
at their defaults are not sent, so the daemon's defaults apply.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

import msgspec

from ._version import __version__
from .base import WORK_DONE_PROGRESS_CREATE, ClientBase, Connecting, ProgressCallback
from .entries import EntryInput, entry_json
from .rpc import Tracer
from .transport import connect_tcp, connect_unix, resolve_token, spawn_process
from .types import (
    NO_LEAF,
    PROTOCOL_VERSION,
    AbortResult,
    AppendedEntry,
    AppendParams,
    AppendResult,
    BuildContextParams,
    BuildContextResult,
    ClientCapabilities,
    ClientInfo,
    CloseResult,
    CompactionPreparationWire,
    ContextFormat,
    ContextUsageParams,
    CoveredParams,
    CoveredResult,
    EntriesParams,
    EntriesResult,
    EntryParams,
    EntryResult,
    ForkParams,
    ForkResult,
    GetSettingsParams,
    HookName,
    InitializeParams,
    InitializeResult,
    LabelParams,
    ListSessionsParams,
    ListSessionsResult,
    ModelRef,
    NavigateParams,
    NavigateResult,
    NewSessionParams,
    NewSessionResult,
    OpenSessionParams,
    OpenSessionResult,
    PathParams,
    PathResult,
    PrepareCompactionParams,
    RunCompactionParams,
    RunCompactionResult,
    SessionRef,
    SetNameParams,
    SettingsResult,
    TreeParams,
    TreeResult,
    TurnEndedParams,
    TurnEndedResult,
    UndoCompactionParams,
    UndoCompactionResult,
    UpdateSettingsParams,
    Usage,
    UserMessagesResult,
    WindowCapabilities,
)

PathLike = str | os.PathLike[str]
# The daemon's request methods, by the client method that sends each (a test keeps it whole).
METHODS: dict[str, str] = {
    "initialize": "initialize",
    "shutdown": "shutdown",
    "session/new": "new_session",
    "session/open": "open_session",
    "session/list": "list_sessions",
    "session/close": "close_session",
    "session/append": "append",
    "session/entries": "entries",
    "session/entry": "entry",
    "session/path": "path",
    "session/tree": "tree",
    "session/label": "label",
    "session/setName": "set_name",
    "session/fork": "fork",
    "session/userMessages": "user_messages",
    "context/build": "build_context",
    "context/usage": "context_usage",
    "agent/turnEnded": "turn_ended",
    "compaction/prepare": "prepare_compaction",
    "compaction/run": "compact",
    "compaction/abort": "abort_compaction",
    "compaction/undo": "undo_compaction",
    "compaction/covered": "covered",
    "tree/navigate": "navigate",
    "tree/abort": "abort_navigation",
    "settings/get": "get_settings",
    "settings/update": "update_settings",
}


class SessiondClient(ClientBase):
    """An asyncio client of sessiond. Create it with ``spawn``, ``connect_socket`` or
    ``connect_tcp``; then ``initialize``; ``close`` (or ``async with``) when done."""

    # -- connecting -----------------------------------------------------------------------------

    @classmethod
    def spawn(
        cls,
        command: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: PathLike | None = None,
        stderr: PathLike | None = None,
        trace: Tracer | None = None,
    ) -> Connecting[Self]:
        """Start ``sessiond serve --stdio`` (``command`` replaces the whole command line).

        ``stderr``: a log file to append the daemon's stderr to; by default it is read
        and its last lines explain an unexpected exit.
        """

        async def connect() -> Self:
            transport = await spawn_process(command, env=env, cwd=cwd, stderr=stderr)
            return cls(transport, trace=trace)

        return Connecting(connect)

    @classmethod
    def connect_socket(
        cls, path: PathLike | None = None, *, trace: Tracer | None = None
    ) -> Connecting[Self]:
        """Connect to ``sessiond serve --socket`` (default: the daemon's default socket)."""

        async def connect() -> Self:
            return cls(await connect_unix(path), trace=trace)

        return Connecting(connect)

    @classmethod
    def connect_tcp(
        cls,
        port: int,
        host: str = "127.0.0.1",
        *,
        token: str | None = None,
        token_file: PathLike | None = None,
        trace: Tracer | None = None,
    ) -> Connecting[Self]:
        """Connect to ``sessiond serve --tcp``; the token (given, from ``token_file``, or
        ``$SESSIOND_TOKEN``) is sent with ``initialize``."""

        async def connect() -> Self:
            secret = resolve_token(token, token_file)
            return cls(await connect_tcp(host, port), auth_token=secret, trace=trace)

        return Connecting(connect)

    # -- lifecycle ------------------------------------------------------------------------------

    async def initialize(
        self,
        *,
        client_name: str = "sessiond-python",
        client_version: str | None = __version__,
        hooks: Iterable[HookName] | None = None,
        llm: bool | None = None,
        opt_out_notifications: Iterable[str] = (),
        settings: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        background_progress: bool = False,
    ) -> InitializeResult:
        """``initialize`` then ``initialized``.

        ``hooks=None`` declares the request hooks that have a handler, plus the
        notification hooks (``hooks/session_compact``, ``hooks/session_tree``) that a
        subscriber named; ``llm=None`` declares ``llm`` when an ``llm/complete``
        handler is registered. ``background_progress`` declares
        ``window.workDoneProgress`` and accepts every token the daemon makes
        (``window/workDoneProgress/create``, unless a handler of the caller's answers
        it): ``$/progress`` for summaries written in the background then arrives with
        the other notifications, on the token ``compaction/started`` names.
        """
        if background_progress and WORK_DONE_PROGRESS_CREATE not in self._rpc.handlers:
            self._rpc.handlers[WORK_DONE_PROGRESS_CREATE] = _accept_token
        declared: list[str] = list(hooks) if hooks is not None else self._declared_hooks()
        params = InitializeParams(
            client_info=ClientInfo(name=client_name, version=client_version),
            protocol_version=protocol_version,
            capabilities=ClientCapabilities(
                hooks=declared,
                llm=llm if llm is not None else "llm/complete" in self._rpc.handlers,
                opt_out_notifications=list(opt_out_notifications),
                window=WindowCapabilities(work_done_progress=True) if background_progress else None,
            ),
            settings=dict(settings) if settings is not None else None,
            auth_token=self._auth_token,
        )
        result = await self.request("initialize", params, InitializeResult)
        self.initialized = True
        self.notify("initialized", {})
        return result

    async def shutdown(self) -> None:
        """``shutdown``: the daemon flushes every session; only ``exit`` may follow."""
        await self.request("shutdown", None, type(None))
        self._shutdown_done = True

    # -- sessions -------------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: PathLike,
        *,
        session_dir: PathLike | None = None,
        path: PathLike | None = None,
        id: str | None = None,
        parent_session: str | None = None,
        write_now: bool = False,
    ) -> NewSessionResult:
        params = NewSessionParams(
            cwd=os.fspath(cwd),
            session_dir=_opt_path(session_dir),
            path=_opt_path(path),
            id=id,
            parent_session=parent_session,
            write_now=write_now,
        )
        return await self.request("session/new", params, NewSessionResult)

    async def open_session(self, path: PathLike) -> OpenSessionResult:
        params = OpenSessionParams(path=os.fspath(path))
        return await self.request("session/open", params, OpenSessionResult)

    async def list_sessions(
        self, *, cwd: PathLike | None = None, session_dir: PathLike | None = None
    ) -> ListSessionsResult:
        params = ListSessionsParams(cwd=_opt_path(cwd), session_dir=_opt_path(session_dir))
        return await self.request("session/list", params, ListSessionsResult)

    async def close_session(self, session_id: str) -> CloseResult:
        return await self.request("session/close", SessionRef(session_id=session_id), CloseResult)

    async def append(
        self,
        session_id: str,
        entries: Sequence[EntryInput | Mapping[str, Any]],
        *,
        expected_leaf_id: str | None = None,
        expect_no_entries: bool = False,
    ) -> AppendResult:
        """Append entries (without id/parentId/timestamp) under the leaf, in one write.

        Each entry is a ``*EntryInput`` struct (``sessiond_client.entries``) or the same
        as a JSON object (which may carry fields the types do not list).
        ``expected_leaf_id``: refuse with ``ConflictError`` unless the leaf is still this
        one; ``expect_no_entries``: unless the session has no entry yet. Without either,
        the entries go under whatever the leaf is.
        """
        if expect_no_entries and expected_leaf_id is not None:
            raise ValueError("expected_leaf_id and expect_no_entries exclude each other")
        params = AppendParams(
            session_id=session_id,
            entries=[entry_json(entry) for entry in entries],
            expected_leaf_id=NO_LEAF if expect_no_entries else expected_leaf_id,
        )
        return await self.request("session/append", params, AppendResult)

    async def entries(
        self,
        session_id: str,
        *,
        ids: Sequence[str] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> EntriesResult:
        """Entries by id (in that order), or a page of the file order."""
        params = EntriesParams(
            session_id=session_id,
            ids=list(ids) if ids is not None else None,
            offset=offset,
            limit=limit,
        )
        return await self.request("session/entries", params, EntriesResult)

    async def entry(self, session_id: str, entry_id: str, *, original: bool = False) -> EntryResult:
        """One entry; with ``original``, as it was written before pruning edited it in
        place (``from_archive`` says whether it came from the pruned-output archive)."""
        params = EntryParams(session_id=session_id, entry_id=entry_id, original=original)
        return await self.request("session/entry", params, EntryResult)

    async def path(self, session_id: str, *, from_id: str | None = None) -> PathResult:
        """Entries from the root to ``from_id`` (default: the leaf)."""
        params = PathParams(session_id=session_id, from_id=from_id)
        return await self.request("session/path", params, PathResult)

    async def tree(self, session_id: str, *, previews: bool = True) -> TreeResult:
        params = TreeParams(session_id=session_id, previews=previews)
        return await self.request("session/tree", params, TreeResult)

    async def label(self, session_id: str, target_id: str, label: str | None) -> AppendedEntry:
        """Set a label on an entry (None or "" clears it)."""
        params = LabelParams(session_id=session_id, target_id=target_id, label=label)
        return await self.request("session/label", params, AppendedEntry)

    async def set_name(self, session_id: str, name: str) -> AppendedEntry:
        params = SetNameParams(session_id=session_id, name=name)
        return await self.request("session/setName", params, AppendedEntry)

    async def fork(self, session_id: str, entry_id: str) -> ForkResult:
        """A new session file holding the path before user message ``entry_id``."""
        params = ForkParams(session_id=session_id, entry_id=entry_id)
        return await self.request("session/fork", params, ForkResult)

    async def user_messages(self, session_id: str) -> UserMessagesResult:
        """The user messages one can fork at: ``[{entryId, text}]``."""
        params = SessionRef(session_id=session_id)
        return await self.request("session/userMessages", params, UserMessagesResult)

    # -- context --------------------------------------------------------------------------------

    async def build_context(
        self,
        session_id: str,
        *,
        leaf_id: str | None = None,
        format: ContextFormat = "agent",
        context_window: int | None = None,
    ) -> BuildContextResult:
        """The messages to send to the model (``format="llm"``: as the LLM sees them)."""
        params = BuildContextParams(
            session_id=session_id, leaf_id=leaf_id, format=format, context_window=context_window
        )
        return await self.request("context/build", params, BuildContextResult)

    async def context_usage(self, session_id: str, *, context_window: int | None = None) -> Usage:
        params = ContextUsageParams(session_id=session_id, context_window=context_window)
        return await self.request("context/usage", params, Usage)

    async def turn_ended(
        self,
        session_id: str,
        *,
        context_window: int | None = None,
        model: ModelRef | None = None,
        progress: ProgressCallback | None = None,
    ) -> TurnEndedResult:
        """pi's end-of-turn checks: overflow recovery, pruning, threshold compaction.

        ``action``: "none", "retry" (resend the last request) or "continue" (send ``prompt``).
        """
        params = TurnEndedParams(session_id=session_id, context_window=context_window, model=model)
        return await self._with_progress("agent/turnEnded", params, TurnEndedResult, progress)

    # -- compaction -----------------------------------------------------------------------------

    async def prepare_compaction(
        self,
        session_id: str,
        *,
        settings: Mapping[str, Any] | None = None,
        include_messages: bool = False,
    ) -> CompactionPreparationWire:
        """What a compaction would do now, without calling a summarizer."""
        params = PrepareCompactionParams(
            session_id=session_id,
            settings=dict(settings) if settings is not None else None,
            include_messages=include_messages,
        )
        return await self.request("compaction/prepare", params, CompactionPreparationWire)

    async def compact(
        self,
        session_id: str,
        *,
        custom_instructions: str | None = None,
        summary: str | None = None,
        first_kept_entry_id: str | None = None,
        settings: Mapping[str, Any] | None = None,
        progress: ProgressCallback | None = None,
    ) -> RunCompactionResult:
        """Compact now. ``summary`` commits a reviewed summary instead of asking a model
        (with ``first_kept_entry_id`` from ``prepare_compaction``: refuse if the cut moved).
        ``progress`` receives the ``$/progress`` values while it runs."""
        params = RunCompactionParams(
            session_id=session_id,
            custom_instructions=custom_instructions,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            settings=dict(settings) if settings is not None else None,
        )
        return await self._with_progress("compaction/run", params, RunCompactionResult, progress)

    async def abort_compaction(self, session_id: str) -> AbortResult:
        params = SessionRef(session_id=session_id)
        return await self.request("compaction/abort", params, AbortResult)

    async def undo_compaction(
        self, session_id: str, *, entry_id: str | None = None
    ) -> UndoCompactionResult:
        """Take the context's newest compaction back (``entry_id``: only if it is that one)."""
        params = UndoCompactionParams(session_id=session_id, entry_id=entry_id)
        return await self.request("compaction/undo", params, UndoCompactionResult)

    async def covered(
        self, session_id: str, entry_id: str, *, offset: int = 0, limit: int = 1000
    ) -> CoveredResult:
        """A page of the ids of the entries a compaction's summary stands for."""
        params = CoveredParams(session_id=session_id, entry_id=entry_id, offset=offset, limit=limit)
        return await self.request("compaction/covered", params, CoveredResult)

    # -- tree -----------------------------------------------------------------------------------

    async def navigate(
        self,
        session_id: str,
        target_id: str,
        *,
        summarize: bool = False,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
        context_window: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> NavigateResult:
        """Move the leaf to ``target_id``, summarizing the branch left when asked."""
        params = NavigateParams(
            session_id=session_id,
            target_id=target_id,
            summarize=summarize,
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            label=label,
            context_window=context_window,
        )
        return await self._with_progress("tree/navigate", params, NavigateResult, progress)

    async def abort_navigation(self, session_id: str) -> AbortResult:
        """``tree/abort``: abort a running branch summary."""
        params = SessionRef(session_id=session_id)
        return await self.request("tree/abort", params, AbortResult)

    # -- settings -------------------------------------------------------------------------------

    async def get_settings(self, *, session_id: str | None = None) -> SettingsResult:
        params = GetSettingsParams(session_id=session_id)
        return await self.request("settings/get", params, SettingsResult)

    async def update_settings(
        self, settings: Mapping[str, Any], *, session_id: str | None = None
    ) -> SettingsResult:
        """Override ``{group: {key: value}}`` for this connection, or for one session."""
        params = UpdateSettingsParams(session_id=session_id, settings=dict(settings))
        return await self.request("settings/update", params, SettingsResult)


async def _accept_token(params: msgspec.Raw) -> None:
    return None


def _opt_path(value: PathLike | None) -> str | None:
    return os.fspath(value) if value is not None else None
