"""Reading an indexed line back: it must still be the entry the index says it is.

The index records where each entry's line is; the bytes are read again whenever the
entry is needed (``SessionStore.raw_line``). Another program may have changed the file
in place since (pi rewrites files; anyone can edit one), so the bytes at that place
may now be half of another line, a line that is not JSON, or invalid UTF-8 where valid
UTF-8 was. Such bytes are never passed on, to a client or to the context: they are a
``FileChangedError`` about that line, and the store reads the file again.

Bytes that were invalid UTF-8 when first read are read as pi reads them (U+FFFD in
place of each bad sequence), as is a lone surrogate escape; the recovery report says
which entries those were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import Entry
from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import FileChangedError
from sessiond.wire.recovery import RecoveryReport

from .records import EntryRecord


class _LineId(msgspec.Struct):
    id: str


# Reads the id and skips the rest of the line, checking that it is one JSON value.
_ID_DECODER: Final = msgspec.json.Decoder(_LineId)


def readable_line(record: EntryRecord, data: bytes, path: Path, report: RecoveryReport) -> bytes:
    """``data``, read at ``record``'s place, as valid UTF-8 (see the module's docstring);
    ``FileChangedError`` if it cannot be the line that was indexed there."""
    if len(data) != record.length:
        raise changed(path, record)
    first_read = record.utf8_state == 0
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        if record.utf8_state == 1:
            raise changed(path, record) from None  # it was valid UTF-8 when read
        if first_read:
            report.invalid_utf8_entries.append(record.id)
        record.utf8_state = 2
        data = data.decode("utf-8", "replace").encode("utf-8")
    else:
        if record.utf8_state == 1:
            # Read clean before: a lone surrogate escape there now is a change, which
            # the JSON check (``checked_line``, or decoding the entry) refuses.
            return data
        if first_read:
            record.utf8_state = 1
    readable = replace_lone_surrogates(data)
    if readable is not data:
        if first_read:
            report.lone_surrogate_entries.append(record.id)
        record.utf8_state = 2  # repaired at every read
    return readable


def checked_line(record: EntryRecord, data: bytes, path: Path, report: RecoveryReport) -> bytes:
    """``readable_line``, and also one JSON value whose id is the record's: what may be
    sent on as the entry, as it is."""
    readable = readable_line(record, data, path, report)
    try:
        same = _ID_DECODER.decode(readable).id == record.id
    except (msgspec.DecodeError, RecursionError):
        same = False
    if not same:
        raise changed(path, record)
    return readable


def checked_entry(record: EntryRecord, data: bytes, path: Path, report: RecoveryReport) -> Entry:
    """The entry ``data`` holds, read as ``readable_line`` reads it; ``FileChangedError``
    if it is not a JSON object with the record's id (the file changed under us)."""
    line = readable_line(record, data, path, report)
    try:
        entry = decode_entry(line)
    except (msgspec.DecodeError, NotAnEntry, RecursionError):
        raise changed(path, record) from None
    if entry.id != record.id:
        raise changed(path, record)
    return entry


def changed(path: Path, record: EntryRecord) -> FileChangedError:
    return FileChangedError(
        f"{path}: the line of entry {record.id} (at byte {record.offset}) is not what it was "
        "when sessiond read the file: another program changed the file; sessiond reads it "
        "again, retry",
        path=str(path),
        entryId=record.id,
        offset=record.offset,
    )
