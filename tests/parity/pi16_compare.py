"""sessiond's answers against pi 1.6's, for one session file and pi's reference document.

Each function returns the list of differences it found (empty when sessiond gives what pi
gives); ``test_parity_pi16`` asserts they are empty, and the lists say exactly what
differs when they are not. Where sessiond departs from pi on purpose (README, "Where
sessiond differs from pi"), the comparison checks that the difference is exactly that
one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from sessiond.core.branch import collect_entries_for_branch_summary, prepare_branch_entries
from sessiond.core.convert import convert_to_llm
from sessiond.core.cutpoints import CUT_ROLES, TURN_START_ROLES, find_valid_cut_points
from sessiond.core.decode import message_from_dict
from sessiond.core.path_reader import EntryPath
from sessiond.core.preparation import CompactionPreparation, prepare_compaction
from sessiond.core.projected_path import ProjectedPath
from sessiond.core.serialize import serialize_conversation
from sessiond.core.tokens import CharsEstimator, estimate_context_tokens
from sessiond.settings import CompactionSettings
from sessiond.store.export import context_json
from sessiond.store.path_access import StorePath
from sessiond.store.session import SessionStore

CHARS = CharsEstimator()
FAILED = ("error", "aborted")


def _estimate_json(estimate: Any) -> dict[str, Any]:
    return {
        "tokens": estimate.tokens,
        "usageTokens": estimate.usage_tokens,
        "trailingTokens": estimate.trailing_tokens,
        "lastUsageIndex": estimate.last_usage_index,
    }


def compare_contexts(store: SessionStore, document: dict[str, Any]) -> dict[str, list[str]]:
    """Context at every leaf pi reported: both forms, per-message estimates, pi's
    ``estimateContextTokens`` and ``estimateProjectedContextTokens``, thinking level and
    model. Keys are leaf ids; a leaf that matches has an empty list."""
    found: dict[str, list[str]] = {}
    for expected in document["contexts"]:
        problems: list[str] = []
        leaf = expected["leafId"]
        found[leaf] = problems
        if "error" in expected:
            problems.append(f"pi failed: {expected['error']}")
            continue
        store.branch(leaf)  # the incremental view, moved to this leaf
        context = store.build_context()
        if context.entry_ids != [m["entryId"] for m in expected["messages"]]:
            problems.append("entry ids differ")
        agent = json.loads(context_json(store, context, "agent"))
        if agent["messages"] != [m["message"] for m in expected["messages"]]:
            problems.append("agent messages differ")
        if agent["thinkingLevel"] != expected["thinkingLevel"]:
            problems.append("thinking level differs")
        if agent["model"] != expected["model"]:
            problems.append("model differs")
        # sessiond's llm form leaves out failed answers, as pi's provider layer does (README)
        pi_llm = [
            m
            for m in expected["llm"]
            if not (m["role"] == "assistant" and m["stopReason"] in FAILED)
        ]
        ours_llm = json.loads(context_json(store, context, "llm"))["messages"]
        if _without_wrapper_words(ours_llm) != _without_wrapper_words(pi_llm):
            problems.append("llm messages differ")
        if [CHARS.estimate(m) for m in context.messages] != [
            m["estimateTokens"] for m in expected["messages"]
        ]:
            problems.append("per-message estimates differ")
        if (
            _estimate_json(estimate_context_tokens(context.messages, CHARS))
            != expected["estimateContextTokens"]
        ):
            problems.append("estimateContextTokens differs")
        projected = _estimate_json(store.leaf_view.estimate_context(CHARS))
        if projected != expected["projectedContextTokens"]:
            problems.append(
                f"projected estimate {projected} != {expected['projectedContextTokens']}"
            )
        reference = ProjectedPath(EntryPath(store.get_branch(), CHARS), CHARS).estimate_context()
        if _estimate_json(reference) != expected["projectedContextTokens"]:
            problems.append("core projected estimate differs")
    return found


_WRAPPER_INTRO = re.compile(r"\[User\]: [^\n]*\n\n<summary>\n")
_AROUND_SUMMARY = re.compile(r"(<summary>)\n*|\n*(</summary>)")


def _normalized(text: str) -> str:
    """The serialization with the summary wrappers' intro sentences taken out: those are
    sessiond's own words (prompts/), and pi's branch wrapper lacks the newline before
    ``</summary>`` (README)."""
    text = _WRAPPER_INTRO.sub("[User]: <summary>\n", text)
    return _AROUND_SUMMARY.sub(lambda m: m.group(1) or m.group(2), text)


def same_serialization(ours: str, pi: str) -> bool:
    ours, pi = _normalized(ours), _normalized(pi)
    if ours == pi:
        return True
    # pi can cut a tool result inside a surrogate pair; sessiond never does (README)
    return ours == pi.encode("utf-16", "surrogatepass").decode("utf-16", "ignore")


def _messages_json(messages: list[Any]) -> list[Any]:
    return [msgspec.to_builtins(m) for m in messages]


def _typed(messages: list[dict[str, Any]]) -> list[Any]:
    """pi's messages read through sessiond's types (fields the types do not hold and
    zero costs drop out on both sides: these lists are compared as typed values)."""
    return _messages_json([message_from_dict(m) for m in messages])


_SUMMARY_INTRO = re.compile(r"^.*?\n\n<summary>\n", re.DOTALL)


def _without_wrapper_words(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The llm form with the summary wrappers' intro sentences taken out (sessiond's own
    words, prompts/) and pi's branch wrapper's missing newline before ``</summary>``."""
    result = []
    for message in messages:
        content = message.get("content")
        shown = message
        if message.get("role") == "user" and isinstance(content, list) and len(content) == 1:
            text = content[0].get("text") if isinstance(content[0], dict) else None
            if isinstance(text, str) and "\n\n<summary>\n" in text and text.endswith("</summary>"):
                text = _SUMMARY_INTRO.sub("<summary>\n", text).replace("\n</summary>", "</summary>")
                shown = {**message, "content": [{**content[0], "text": text}]}
        result.append(shown)
    return result


def compare_preparations(store: SessionStore, document: dict[str, Any]) -> list[str]:
    """``prepareCompaction`` at every leaf and keep pi reported: the cut, the split turn,
    ``tokensBefore``, the previous summary, what is summarized (messages and the text the
    summarizer gets) and the file lists."""
    problems: list[str] = []
    for expected in document["prepareCompaction"]:
        where = f"leaf {expected.get('leafId')} keep {expected.get('keep')}"
        if "error" in expected:
            problems.append(f"{where}: pi failed: {expected['error']}")
            continue
        settings = CompactionSettings(
            keep_recent_tokens=expected["keep"], token_estimator="chars", adjust_keep_by_usage=False
        )
        path = StorePath(store, store.path_records(expected["leafId"]), CHARS)
        ours = prepare_compaction(path, settings, estimator=CHARS)
        pi = expected["result"]
        if pi is None:
            if isinstance(ours, CompactionPreparation):
                problems.append(
                    f"{where}: pi prepares nothing, sessiond cuts at {ours.first_kept_entry_id}"
                )
            continue
        if not isinstance(ours, CompactionPreparation):
            problems.append(f"{where}: sessiond prepares nothing ({ours.reason})")
            continue
        pi_summarize = _typed(pi["messagesToSummarize"])
        pi_prefix = _typed(pi["turnPrefixMessages"])
        split_as_pi = ours.is_split_turn == pi["isSplitTurn"]
        summarize = _messages_json(ours.messages_to_summarize)
        prefix = _messages_json(ours.turn_prefix_messages)
        leaf = expected["leafId"]
        if ours.first_kept_entry_id != pi["firstKeptEntryId"] and _inside_tool_batch(
            store, leaf, pi["firstKeptEntryId"]
        ):
            continue  # sessiond's decision: a cut never separates tool calls from results
        if ours.is_split_turn != pi["isSplitTurn"] and _metadata_pull_in(store, leaf, ours, pi):
            # sessiond's decision: metadata pulled in before a user message is not a split
            # turn; pi reports the previous turn as the prefix.
            pi_summarize, pi_prefix = pi_summarize + pi_prefix, []
        elif ours.is_split_turn != pi["isSplitTurn"]:
            problems.append(f"{where}: split turn {ours.is_split_turn} != {pi['isSplitTurn']}")
        if ours.first_kept_entry_id != pi["firstKeptEntryId"]:
            problems.append(
                f"{where}: first kept {ours.first_kept_entry_id} != {pi['firstKeptEntryId']}"
            )
            continue
        if ours.tokens_before != pi["tokensBefore"]:
            problems.append(f"{where}: tokensBefore {ours.tokens_before} != {pi['tokensBefore']}")
        if ours.previous_summary != pi["previousSummary"]:
            problems.append(f"{where}: previous summary differs")
        if summarize != pi_summarize:
            problems.append(f"{where}: messages to summarize differ")
        if prefix != pi_prefix:
            problems.append(f"{where}: turn prefix differs")
        read, modified = ours.file_ops.lists()
        if {"readFiles": read, "modifiedFiles": modified} != pi["fileLists"]:
            problems.append(f"{where}: file lists differ")
        if split_as_pi:
            for messages, key in (
                (ours.messages_to_summarize, "serializedMessagesToSummarize"),
                (ours.turn_prefix_messages, "serializedTurnPrefix"),
            ):
                if not same_serialization(
                    serialize_conversation(convert_to_llm(messages)), pi[key]
                ):
                    problems.append(f"{where}: summarizer input ({key}) differs")
    return problems


def _metadata_pull_in(
    store: SessionStore, leaf_id: str, ours: CompactionPreparation, pi: dict[str, Any]
) -> bool:
    """pi's split turn is only its pull-in of metadata before a turn start: from the cut,
    the entries give the context nothing up to one that starts a turn (a user message, a
    shell run, a custom message, a branch summary)."""
    if ours.is_split_turn or not pi["isSplitTurn"]:
        return False
    view, start = _projected_from(store, leaf_id, ours.first_kept_entry_id)
    for k in range(start, len(view)):
        if view.type_at(k) == "compaction":
            return False
        roles = view.roles_at(k)
        if roles:
            return any(role in TURN_START_ROLES for role in roles)
    return False


def _projected_from(store: SessionStore, leaf_id: str, entry_id: str) -> tuple[ProjectedPath, int]:
    """The projected path to ``leaf_id`` and the index of ``entry_id`` in it (its length
    when it is not there)."""
    view = ProjectedPath(StorePath(store, store.path_records(leaf_id), CHARS), CHARS)
    ids = [view.id_at(k) for k in range(len(view))]
    return view, ids.index(entry_id) if entry_id in ids else len(view)


def _inside_tool_batch(store: SessionStore, leaf_id: str, pi_first_kept: str) -> bool:
    """pi cut where sessiond's rule forbids: the first entry from pi's cut that gives the
    context a message is one pi may cut at, but it comes after an answer's tool calls
    before all their results (no cut point for sessiond)."""
    view, first = _projected_from(store, leaf_id, pi_first_kept)
    start = 1 if view.previous_compaction is not None else 0
    points = set(find_valid_cut_points(view, start, len(view)))
    for k in range(first, len(view)):
        roles = view.roles_at(k)
        if roles and view.type_at(k) != "compaction":
            return k not in points and any(role in CUT_ROLES for role in roles)
    return False


def compare_branch_summaries(store: SessionStore, document: dict[str, Any]) -> list[str]:
    """What a branch summary would cover and send, for every pair pi reported."""
    problems: list[str] = []
    for expected in document["branchSummaries"]:
        where = f"{expected.get('oldLeafId')} -> {expected.get('targetId')}"
        if "error" in expected:
            problems.append(f"{where}: pi failed: {expected['error']}")
            continue
        collection = collect_entries_for_branch_summary(
            store.path_records, expected["oldLeafId"], expected["targetId"]
        )
        if collection.common_ancestor_id != expected["commonAncestorId"]:
            problems.append(f"{where}: common ancestor differs")
        if [r.id for r in collection.entries] != expected["entryIds"]:
            problems.append(f"{where}: entries differ")
            continue
        entries = [store.entry_of(r) for r in collection.entries]
        for budget in expected["prepared"]:
            prepared = prepare_branch_entries(entries, CHARS, budget.get("tokenBudget", 0))
            if "error" in budget:
                # pi 1.6 fails on a message with null content or a custom message without
                # content here (its estimate reads the raw entry); sessiond reads them as
                # pi's context does, [] (README).
                if not _has_null_content(store, collection.entries):
                    problems.append(f"{where}: pi failed: {budget['error']}")
                continue
            label = f"{where} budget {budget['tokenBudget']}"
            if prepared.total_tokens != budget["totalTokens"]:
                problems.append(
                    f"{label}: tokens {prepared.total_tokens} != {budget['totalTokens']}"
                )
            if _messages_json(prepared.messages) != _typed(budget["messages"]):
                problems.append(f"{label}: messages differ")
            if list(prepared.file_ops.lists()) != [
                budget["fileLists"]["readFiles"],
                budget["fileLists"]["modifiedFiles"],
            ]:
                problems.append(f"{label}: file lists differ")
            serialized = serialize_conversation(convert_to_llm(prepared.messages))
            if not same_serialization(serialized, budget["serialized"]):
                problems.append(f"{label}: summarizer input differs")
    return problems


def _has_null_content(store: SessionStore, records: list[Any]) -> bool:
    """Whether a line among ``records`` holds a null content, or a custom message none."""
    for record in records:
        line = store.raw_line(record)
        if b'"content":null' in line:
            return True
        if record.type == "custom_message" and b'"content":' not in line:
            return True
    return False


def compare_tree(store: SessionStore, document: dict[str, Any]) -> list[str]:
    """Entries, the file's leaf and the tree (children in pi's order, labels)."""
    problems: list[str] = []
    ours = [{"id": r.id, "parentId": r.parent_id, "type": r.type} for r in store.records()]
    if ours != document["entries"]:
        problems.append("entries differ")
    if store.leaf_id != document["leafId"]:
        problems.append("leaf differs")
    roots = store.get_tree()
    if [n.record.id for n in roots] != document["tree"]["rootIds"]:
        problems.append("roots differ")
    stack = list(roots)
    while stack:
        node = stack.pop()
        expected = document["tree"]["nodes"][node.record.id]
        if [c.record.id for c in node.children] != expected["children"]:
            problems.append(f"children of {node.record.id} differ")
        if node.label != expected["label"]:
            problems.append(f"label of {node.record.id} differs")
        stack.extend(node.children)
    return problems
