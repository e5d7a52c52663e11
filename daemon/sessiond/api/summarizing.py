"""The summarizer a request uses: the settings' chain, the client-delegated model among
its candidates, and ``$/progress`` while a summary streams in."""

from __future__ import annotations

import time
from typing import Final, Literal

from sessiond.jsonrpc import RequestContext, WorkDoneBegin, WorkDoneEnd, WorkDoneReport
from sessiond.llm.base import Progress, ProgressCallback
from sessiond.service.actor import SessionActor
from sessiond.service.summarize import SummaryContext
from sessiond.settings import Settings

from .daemon import Daemon

# $/progress reports at most this often while a summary streams in.
_PROGRESS_INTERVAL: Final = 0.25


def request_summaries(
    daemon: Daemon,
    ctx: RequestContext,
    actor: SessionActor,
    settings: Settings,
    mode: Literal["manual", "auto"],
    title: str,
    *,
    with_progress: bool = True,
) -> SummaryContext:
    """A summarizer for this request, reporting ``$/progress`` when it has a token (and
    ``with_progress``: a summary written in the background outlives its request).
    ``llm/complete`` goes only to a client that has the session open."""
    delegated = daemon.clients.delegated_completion(
        preferred=ctx.connection.id, audience=lambda: actor.subscribers
    )
    reports = with_progress and _reports_progress(daemon, ctx)
    progress = _progress_reporter(ctx, title) if reports else None
    # The summarizers load on first use: most requests never need them.
    from sessiond.service.summarizer_setup import summary_context

    return summary_context(settings, mode=mode, delegated=delegated, progress=progress)


def end_progress(daemon: Daemon, ctx: RequestContext, message: str) -> None:
    if _reports_progress(daemon, ctx):
        ctx.progress(WorkDoneEnd(message=message))


def _reports_progress(daemon: Daemon, ctx: RequestContext) -> bool:
    return ctx.work_done_token is not None and daemon.client(ctx).wants("$/progress")


def _progress_reporter(ctx: RequestContext, title: str) -> ProgressCallback:
    ctx.progress(WorkDoneBegin(title=title, cancellable=True))
    last = 0.0

    def report(update: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < _PROGRESS_INTERVAL:
            return
        last = now
        ctx.progress(WorkDoneReport(message=f"{update.model}: {update.chars} characters received"))

    return report
