"""The summarizer a request uses: the settings' chain, the client-delegated model among
its candidates, and ``$/progress`` while a summary streams in."""

from __future__ import annotations

import time
from collections.abc import Callable
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
    progress: ProgressCallback | None,
) -> SummaryContext:
    """A summarizer for this request that tells ``progress`` how the summary streams in.
    ``llm/complete`` goes only to a client that has the session open."""
    delegated = daemon.clients.delegated_completion(
        preferred=ctx.connection.id, audience=lambda: actor.subscribers
    )
    # The summarizers load on first use: most requests never need them.
    from sessiond.service.summarizer_setup import summary_context

    return summary_context(settings, mode=mode, delegated=delegated, progress=progress)


def request_progress(daemon: Daemon, ctx: RequestContext, title: str) -> ProgressCallback | None:
    """``$/progress`` on the request's ``workDoneToken``, begun now; None when the
    request carried none or the client opted out."""
    if not _reports_progress(daemon, ctx):
        return None
    ctx.progress(WorkDoneBegin(title=title, cancellable=True))
    return throttled_reports(lambda message: ctx.progress(WorkDoneReport(message=message)))


def end_progress(daemon: Daemon, ctx: RequestContext, message: str) -> None:
    if _reports_progress(daemon, ctx):
        ctx.progress(WorkDoneEnd(message=message))


def throttled_reports(send: Callable[[str], object]) -> ProgressCallback:
    """A summarizer's progress as report messages, at most one per ``_PROGRESS_INTERVAL``."""
    last = 0.0

    def report(update: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < _PROGRESS_INTERVAL:
            return
        last = now
        send(f"{update.model}: {update.chars} characters received")

    return report


def _reports_progress(daemon: Daemon, ctx: RequestContext) -> bool:
    return ctx.work_done_token is not None and daemon.client(ctx).wants("$/progress")
