"""``sessiond context FILE``: the context pi would send at a leaf."""

from __future__ import annotations

import argparse

from sessiond.core.context import UNSET
from sessiond.core.describe import describe_message
from sessiond.core.messages import AnyMessage
from sessiond.store.export import context_json
from sessiond.store.session import SessionStore

from .common import add_settings_arguments, effective_settings, write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Build the context pi would send to the model at the session's leaf."
    parser.add_argument("file", help="a session .jsonl file")
    parser.add_argument("--leaf", help="build the context at this entry id instead of the leaf")
    parser.add_argument(
        "--llm", action="store_true", help="after convertToLlm: provider-ready messages"
    )
    parser.add_argument(
        "--json", action="store_true", help="print {messages, thinkingLevel, model}"
    )
    add_settings_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = effective_settings(args)
    with SessionStore.open(args.file, readonly=True, storage=settings.storage) as store:
        leaf = args.leaf if args.leaf is not None else UNSET
        if args.leaf is not None:
            store.record(args.leaf)  # an unknown id is an error here, not pi's silent fallback
        context = store.build_context(leaf)
        if args.json:
            write_json(context_json(store, context, "llm" if args.llm else "agent"))
            return 0
        model = f"{context.model.provider}/{context.model.model_id}" if context.model else "none"
        shown: list[tuple[AnyMessage, bool]]
        if args.llm:
            converted = store.dialect.convert_to_llm_tracked(context.messages)
            shown = [(m, False) for m, _, _ in converted]
        else:
            shown = [(m, i in context.edited) for i, m in enumerate(context.messages)]
        print(f"{len(shown)} messages, thinking {context.thinking_level}, model {model}")
        for index, (message, edited) in enumerate(shown):
            mark = " (edited)" if edited else ""  # a context_edit replaced its content
            print(f"[{index}]{mark} {describe_message(message, 100)}")
    return 0
