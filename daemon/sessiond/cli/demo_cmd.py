"""``sessiond demo``: the daemon's main job, end to end, on the bundled sample session.

It starts ``sessiond serve --stdio`` and drives it through the Python client the
way an editor plugin would: open the session, show its tree and context usage,
append a turn, compact with the offline summarizer, navigate back to an earlier
question with a branch summary, and show the tree and usage again. It works on
a copy of ``examples/sample-session.jsonl``; nothing needs a network or a key.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import write_control
from .render import PictureNode, picture

_SAMPLE_NAME = "sample-session.jsonl"
# Demo settings, sent with initialize: the offline summarizer, whatever the user's
# settings file says, and a keep budget small enough for the sample to compact with
# work since its earlier compaction to summarize (at 1,500 the cut splits the last
# turn and the earlier summary is carried over unchanged, as pi does).
_DEMO_SETTINGS: dict[str, Any] = {
    "summarizer": {"candidates": []},
    "compaction": {"keepRecentTokens": 1000},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0] if __doc__ else None
    parser.add_argument(
        "--session",
        type=Path,
        help="use a copy of this session file instead of the bundled sample",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the working copy (its path is printed)"
    )
    parser.set_defaults(handler=run)


def find_sample() -> Path:
    """The bundled sample: beside the package when installed, in the checkout otherwise."""
    from importlib import resources

    packaged = resources.files("sessiond") / "examples" / _SAMPLE_NAME
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "examples" / _SAMPLE_NAME


def run(args: argparse.Namespace) -> int:
    source = args.session or find_sample()
    if not source.is_file():
        print(f"sessiond: error: no session file at {source}", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="sessiond-demo-"))
    copy = workdir / source.name
    shutil.copyfile(source, copy)
    try:
        return asyncio.run(_demo(copy))
    finally:
        if args.keep:
            print(f"\nThe demo's session file is kept at {copy}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _heading(text: str) -> None:
    if sys.stdout.isatty():
        write_control(f"\n\x1b[1m== {text}\x1b[0m\n", sys.stdout)
    else:
        print(f"\n== {text}")


def _tree(result: Any, width: int = 70) -> list[str]:
    nodes = {
        node.id: PictureNode(
            id=node.id,
            text=(node.preview or node.type)[:width],
            children=node.children,
            active=node.active,
            label=node.label,
        )
        for node in result.nodes
    }
    return picture(nodes, result.root_ids, result.leaf_id)


def _show_tree(result: Any, focus: Sequence[str] = ()) -> None:
    lines = _tree(result)
    if len(lines) <= 40:
        for line in lines:
            print(line)
        return
    # A long session: the first lines, then the part around the leaf.
    for line in lines[:6]:
        print(line)
    print(f"   ... {len(lines) - 26} more entries ...")
    for line in lines[-20:]:
        print(line)


def _usage(usage: Any) -> str:
    return (
        f"{usage.tokens:,} tokens of a {usage.context_window:,} window ({usage.percent:.1f}%); "
        f"compaction threshold {usage.threshold:,}"
    )


async def _demo(path: Path) -> int:
    from sessiond_client import SessiondClient

    started = time.perf_counter()
    command = [sys.executable, "-m", "sessiond", "serve", "--stdio", "--log-level", "WARNING"]
    async with SessiondClient.spawn(command, env=dict(os.environ)) as client:
        info = await client.initialize(client_name="sessiond-demo", settings=_DEMO_SETTINGS)
        print(
            f"Started {info.server_info.name} {info.server_info.version} "
            f"(protocol {info.protocol_version}) in {time.perf_counter() - started:.2f} s"
        )
        opened = await client.open_session(path)
        sid = opened.session_id
        _heading(f"The session: {opened.name or path.name} ({opened.entry_count} entries)")
        _show_tree(await client.tree(sid))
        print(f"\nContext: {_usage(await client.context_usage(sid))}")

        _heading("The agent appends a turn")
        now = int(time.time() * 1000)
        turn = [
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": "Please add a --version flag to the CLI.",
                    "timestamp": now,
                },
            },
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Added `--version` to `src/mdtoc/cli.py`."},
                        {
                            "type": "toolCall",
                            "id": "demo-1",
                            "name": "edit",
                            "arguments": {"path": "src/mdtoc/cli.py"},
                        },
                    ],
                    "api": "anthropic-messages",
                    "provider": "anthropic",
                    "model": "claude-sonnet-4-5",
                    "usage": {
                        "input": 7200,
                        "output": 180,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": 7380,
                    },
                    "stopReason": "stop",
                    "timestamp": now + 1,
                },
            },
        ]
        appended = await client.append(sid, turn)
        print(f"Appended {', '.join(appended.ids)}; leaf {appended.leaf_id}")
        print(f"Context: {_usage(appended.usage)}")
        ended = await client.turn_ended(sid)
        print(f"agent/turnEnded -> {ended.action} (below the threshold: nothing to do)")

        _heading("Compacting with the offline summarizer")
        chars = [0]

        def progress(report: Any) -> None:
            chars[0] += 1

        compacted = await client.compact(
            sid, custom_instructions="keep the slug decisions", progress=progress
        )
        entry = compacted.entry
        print(
            f"Compaction {entry['id']}: kept from {entry['firstKeptEntryId']}, "
            f"{compacted.tokens_before:,} -> {compacted.tokens_after:,} tokens"
        )
        summary_lines = entry["summary"].splitlines()
        for line in summary_lines[:20]:
            print(f"  | {line}")
        if len(summary_lines) > 20:
            print(f"  | ... ({len(summary_lines) - 20} more lines)")

        _heading("Navigating back to an earlier question, with a branch summary")
        tree = await client.tree(sid)
        users = [n for n in tree.nodes if n.role == "user" and n.active]
        target = users[-2] if len(users) > 1 else users[0]
        navigated = await client.navigate(sid, target.id, summarize=True, label="demo: back here")
        print(f"Moved to {navigated.leaf_id}; the question goes back to the editor:")
        print(f"  > {navigated.editor_text}")
        if navigated.summary_entry is not None:
            branch = navigated.summary_entry
            print(f"Branch summary {branch['id']} written under {branch['parentId']}:")
            for line in branch["summary"].splitlines()[:6]:
                print(f"  | {line}")

        _heading("The tree now")
        _show_tree(await client.tree(sid))
        print(f"\nContext: {_usage(await client.context_usage(sid))}")
        await client.close_session(sid)
    print(f"\nDone in {time.perf_counter() - started:.2f} s; the daemon has shut down.")
    return 0
