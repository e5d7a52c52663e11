"""An optional field sent as null is the same as one left out.

The protocol gives no meaning to null versus absent, because code generators cannot
tell them apart: a generated client sends every optional field it was not given as
``null`` (quicktype's Go structs, many others). ``without_null_optionals`` removes
those nulls from decoded JSON, guided by the msgspec type it is meant to be: a known
optional field (one with a default) whose value is null is dropped, inside nested
structs, tagged unions (the member its tag names) and lists too. Required fields keep
their null (``parentId`` of a root, ``thinkingLevel`` cleared), and so do fields the
type does not know (their meaning is someone else's).

Pure: no I/O, nothing but msgspec.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
import msgspec.inspect as mi


def without_null_optionals(value: Any, kind: Any) -> Any:
    """``value`` (JSON as builtins) with the nulls of ``kind``'s optional fields removed.

    Dicts are changed in place where a null goes; the value is returned for convenience.
    """
    _strip(value, _info(kind))
    return value


def decode_reading_null_as_absent(
    decoder: msgspec.json.Decoder[Any], raw: bytes | memoryview, kind: Any
) -> Any:
    """``decoder.decode(raw)``; if that fails and ``raw`` holds a null, the same JSON with
    its optional nulls left out. A body that fails either way raises the first error."""
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as first:
        if b"null" not in bytes(raw):
            raise
        data = without_null_optionals(msgspec.json.decode(raw), kind)
        try:
            return msgspec.convert(data, kind)
        except msgspec.ValidationError:
            raise first from None


@cache
def _info(kind: Any) -> mi.Type:
    return mi.type_info(kind)


def _strip(value: Any, info: mi.Type) -> None:
    if isinstance(info, mi.StructType):
        if isinstance(value, dict):
            _strip_struct(value, info)
    elif isinstance(info, mi.UnionType):
        member = _member(value, info)
        if member is not None:
            _strip(value, member)
    elif isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        if isinstance(value, list):
            for item in value:
                _strip(item, info.item_type)
    elif isinstance(info, mi.DictType) and isinstance(value, dict):
        for item in value.values():
            _strip(item, info.value_type)
    elif isinstance(info, mi.Metadata):
        _strip(value, info.type)


def _strip_struct(value: dict[str, Any], info: mi.StructType) -> None:
    for field in info.fields:
        name = field.encode_name
        if name not in value:
            continue
        if value[name] is None:
            if not field.required:
                del value[name]
        else:
            _strip(value[name], field.type)


def _member(value: Any, info: mi.UnionType) -> mi.Type | None:
    """The member of a union that ``value`` is: the struct its tag names, or the one struct
    (or list, or dict) type among the members."""
    structs = [t for t in info.types if isinstance(t, mi.StructType)]
    if isinstance(value, dict):
        tagged = [t for t in structs if t.tag_field is not None]
        if tagged:
            return next((t for t in tagged if value.get(t.tag_field) == t.tag), None)
        if len(structs) == 1:
            return structs[0]
        dicts = [t for t in info.types if isinstance(t, mi.DictType)]
        return dicts[0] if len(dicts) == 1 else None
    if isinstance(value, list):
        lists = [t for t in info.types if isinstance(t, mi.ListType)]
        return lists[0] if len(lists) == 1 else None
    return None
