"""The LSP messages the layer itself handles or sends, and their params.

``$/cancelRequest`` (handled by the dispatcher), ``$/progress`` with LSP's work-done
values, ``window/workDoneProgress/create`` (the request that makes a token for work
no request of the client's asked for), and ``window/logMessage`` with its
``MessageType``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import msgspec

from sessiond.jsonrpc.envelopes import RequestId

CANCEL_REQUEST = "$/cancelRequest"
PROGRESS = "$/progress"
LOG_MESSAGE = "window/logMessage"
WORK_DONE_PROGRESS_CREATE = "window/workDoneProgress/create"


class CancelParams(msgspec.Struct):
    id: RequestId


class ProgressNotificationParams(msgspec.Struct):
    """``$/progress`` as the layer sends it: the value is whatever the handler gave."""

    token: RequestId
    value: Any


class WorkDoneProgressCreateParams(msgspec.Struct):
    """LSP ``WorkDoneProgressCreateParams``: the token the server will report on."""

    token: RequestId


class LogMessageParams(msgspec.Struct):
    type: int
    message: str


class WorkDoneBegin(msgspec.Struct, tag_field="kind", tag="begin", omit_defaults=True):
    """LSP ``WorkDoneProgressBegin``: the first ``$/progress`` value of an operation."""

    title: str
    cancellable: bool | None = None
    message: str | None = None
    percentage: int | None = None


class WorkDoneReport(msgspec.Struct, tag_field="kind", tag="report", omit_defaults=True):
    cancellable: bool | None = None
    message: str | None = None
    percentage: int | None = None


class WorkDoneEnd(msgspec.Struct, tag_field="kind", tag="end", omit_defaults=True):
    message: str | None = None


WorkDoneProgress = WorkDoneBegin | WorkDoneReport | WorkDoneEnd


class MessageType(IntEnum):
    """LSP ``MessageType`` of ``window/logMessage``."""

    ERROR = 1
    WARNING = 2
    INFO = 3
    LOG = 4
    DEBUG = 5
