"""Generate realistic pi v3 session files, deterministically from a seed.

The files look like what pi 0.73.1 writes for a long coding-agent session: a header, then
``model_change`` / ``thinking_level_change``, then turns of user prompt, assistant steps
with thinking and tool calls, tool results of very different sizes, the occasional error,
abort, ``!`` shell command, extension message, label, rename, model or thinking switch; with
``--branchy`` the user navigates back in the tree (with pi-style branch summaries); with
``--compactions`` compaction entries appear whenever the context crosses the threshold, with
the cut pi's own ``findCutPoint`` would pick for the generator's ``keep_recent_tokens``.

CLI (from the repository root)::

    python -m sessiond_testkit.generate_session --entries 100000 --branchy --compactions \
        --out s.jsonl

API::

    from sessiond_testkit.generate_session import generate
    info = generate("s.jsonl", entries=10_000, branchy=True, compactions=True, seed=7)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import msgspec

from sessiond_testkit import corpus as cp
from sessiond_testkit import pi_format as pf

Json = dict[str, Any]

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_DEFAULT_START_MS = 1_778_838_723_417  # 2026-05-15T09:52:03.417Z
_SYSTEM_PROMPT_TOKENS = 5_200  # pi's system prompt plus tool schemas, roughly
_RESERVE_TOKENS = 16_384  # pi's default compaction.reserveTokens

_encode = msgspec.json.encode


@dataclass
class GeneratedInfo:
    """What a generated session contains; tests use it to pick leaves and pairs to check."""

    path: str
    session_id: str
    seed: int
    entries: int
    bytes: int
    seconds: float
    leaf_id: str
    counts: dict[str, int] = field(default_factory=dict)
    """Entries per ``type``."""
    roles: dict[str, int] = field(default_factory=dict)
    """``message`` entries per ``message.role``."""
    branch_point_ids: list[str] = field(default_factory=list)
    """Entries with two or more children, in file order."""
    leaf_ids: list[str] = field(default_factory=list)
    """Every entry without children (tips of all branches), in file order; the last is leaf_id."""
    branch_summary_ids: list[str] = field(default_factory=list)
    compaction_ids: list[str] = field(default_factory=list)
    navigations: list[tuple[str, str]] = field(default_factory=list)
    """(old leaf, target) of every tree navigation, as given to navigateTree."""
    labels: dict[str, str] = field(default_factory=dict)
    """The resolved label of each labelled entry at the end of the file."""
    session_name: str | None = None
    keep_recent_tokens: int = 0
    """keepRecentTokens that reproduces each compaction's firstKeptEntryId with pi's cut rule."""
    compaction_threshold: int = 0
    models: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)


class _Rec:
    """What the generator remembers about an entry it wrote."""

    __slots__ = (
        "ctx_tok",
        "cut_ok",
        "details",
        "id",
        "is_msg",
        "kind",
        "mods",
        "parent",
        "reads",
        "text",
        "tok",
        "usage_total",
    )

    def __init__(self, id_: str, parent: str | None, kind: str) -> None:
        self.id = id_
        self.parent = parent
        self.kind = kind  # entry type, or the role for message entries ("user", "assistant"...)
        self.is_msg = False  # a "message" entry: findCutPoint counts only these
        self.cut_ok = False  # a valid cut point for findCutPoint
        self.tok = 0  # estimateTokens of the message the entry stands for
        self.ctx_tok = 0  # what it adds to the LLM context when it is on the path
        self.reads: tuple[str, ...] = ()
        self.mods: tuple[str, ...] = ()
        self.details: tuple[list[str], list[str]] | None = None
        self.text = ""  # user prompt text, to edit it again after navigating back to it
        self.usage_total = 0  # usable assistant usage (0: none / error / aborted)


def _tool_args_len(args: Json) -> int:
    return pf.js_len(_encode(args).decode())


class _Generator:
    def __init__(
        self,
        path: Path,
        entries: int,
        branchy: bool,
        compactions: bool,
        avg_bytes: int,
        seed: int,
        compaction_threshold: int | None,
        keep_recent_tokens: int | None,
        start_ms: int,
    ) -> None:
        self.path = path
        self.n_target = entries
        self.branchy = branchy
        self.compactions = compactions
        self.avg_bytes = avg_bytes
        self.seed = seed
        self.rng = Random(seed)
        self.corpus = cp.Corpus(seed)
        self.new_id = pf.IdMaker(self.rng)
        self.now = start_ms + self.rng.randrange(0, 86_400_000)
        self.session_id = pf.uuid7(self.now, self.rng)

        est_tokens = entries * avg_bytes // 4
        if compaction_threshold is None:
            # Scale the window down for small files so that they still get several compactions.
            compaction_threshold = max(12_000, min(200_000 - _RESERVE_TOKENS, est_tokens // 6))
        self.threshold = compaction_threshold
        self.keep = keep_recent_tokens or min(20_000, max(2_000, self.threshold // 4))

        self.recs: dict[str, _Rec] = {}
        self.children: dict[str | None, int] = {}
        self.file_order: list[str] = []
        self.counts: dict[str, int] = {}
        self.roles: dict[str, int] = {}
        self.n_written = 0
        self.bytes = 0
        self.buf: list[bytes] = []
        self.buf_size = 0
        self.out = path.open("wb")

        # Current path from the root, with prefix sums of context tokens and the positions of
        # compactions on it, so that context size stays O(1) to update and cheap to recompute.
        self.path_recs: list[_Rec] = []
        self.cum: list[int] = [0]
        self.comps: list[tuple[int, int]] = []  # (index of compaction, index of its first kept)
        self.index_of: dict[str, int] = {}

        self.model = pf.MODELS["claude-sonnet-4-5"]
        self.thinking = "medium"
        self.cached_prefix = 0
        self.label_map: dict[str, str] = {}
        self.session_name: str | None = None
        self.navigations: list[tuple[str, str]] = []
        self.abandoned: list[str] = []
        self.next_nav = self._nav_gap(first=True)
        self.call_seq = 0
        self.models_used = [self.model.id]

    # --- low level --------------------------------------------------------------------

    def left(self) -> int:
        return self.n_target - self.n_written

    def tick(self, lo: int, hi: int) -> int:
        self.now += self.rng.randint(lo, hi)
        return self.now

    def scale(self) -> float:
        """Size multiplier steering the running average towards ``avg_bytes`` per entry."""
        base = self.avg_bytes / 2000
        if self.n_written < 20:
            return base
        want = self.avg_bytes * (self.n_written + 40)
        have = self.bytes + self.avg_bytes * 40
        return base * min(4.0, max(0.25, want / have))

    def _write_line(self, obj: Json) -> None:
        line = _encode(obj) + b"\n"
        self.buf.append(line)
        self.buf_size += len(line)
        self.bytes += len(line)
        if self.buf_size > 4_000_000:
            self.out.write(b"".join(self.buf))
            self.buf.clear()
            self.buf_size = 0

    def _leaf(self) -> str | None:
        return self.path_recs[-1].id if self.path_recs else None

    def emit(self, entry: Json, rec: _Rec) -> _Rec:
        self._write_line(entry)
        self.n_written += 1
        self.recs[rec.id] = rec
        self.file_order.append(rec.id)
        self.children[rec.parent] = self.children.get(rec.parent, 0) + 1
        t = entry["type"]
        self.counts[t] = self.counts.get(t, 0) + 1
        if t == "message":
            self.roles[rec.kind] = self.roles.get(rec.kind, 0) + 1
        self._push(rec)
        return rec

    def _push(self, rec: _Rec) -> None:
        self.index_of[rec.id] = len(self.path_recs)
        self.path_recs.append(rec)
        self.cum.append(self.cum[-1] + rec.ctx_tok)

    def _truncate(self, n: int) -> None:
        for r in self.path_recs[n:]:
            self.index_of.pop(r.id, None)
        del self.path_recs[n:]
        del self.cum[n + 1 :]
        while self.comps and self.comps[-1][0] >= n:
            self.comps.pop()

    def _rebuild_path(self, leaf: str) -> None:
        chain: list[_Rec] = []
        cur: str | None = leaf
        while cur is not None:
            r = self.recs[cur]
            chain.append(r)
            cur = r.parent
        chain.reverse()
        self._truncate(0)
        for r in chain:
            self._push(r)
            if r.kind == "compaction":
                self._register_compaction(r)

    def _register_compaction(self, rec: _Rec) -> None:
        first_kept = rec.text  # the compaction rec keeps its firstKeptEntryId here
        self.comps.append((len(self.path_recs) - 1, self.index_of.get(first_kept, -1)))

    def context_tokens(self) -> int:
        """pi's buildSessionContext for the current path, measured with estimateTokens."""
        end = len(self.path_recs)
        if not self.comps:
            return self.cum[end]
        ci, fk = self.comps[-1]
        kept = self.cum[ci] - self.cum[fk] if 0 <= fk < ci else 0
        return self.path_recs[ci].tok + kept + self.cum[end] - self.cum[ci + 1]

    def ts(self) -> str:
        return pf.iso(self.now)

    # --- entries ----------------------------------------------------------------------

    def _message(self, msg: Json, kind: str, tok: int) -> _Rec:
        rec = _Rec(self.new_id(), self._leaf(), kind)
        rec.is_msg = True
        rec.cut_ok = kind != "toolResult"
        rec.tok = tok
        rec.ctx_tok = tok
        return self.emit(pf.message_entry(rec.id, rec.parent, self.ts(), msg), rec)

    def _meta(self, entry_fn: Any, kind: str, *args: Any) -> _Rec:
        rec = _Rec(self.new_id(), self._leaf(), kind)
        return self.emit(entry_fn(rec.id, rec.parent, self.ts(), *args), rec)

    def model_change(self, model: pf.Model) -> None:
        self.tick(500, 20_000)
        self.model = model
        self.cached_prefix = 0
        if model.id not in self.models_used:
            self.models_used.append(model.id)
        self._meta(pf.model_change_entry, "model_change", model)

    def thinking_change(self, level: str) -> None:
        self.tick(500, 20_000)
        self.thinking = level
        self._meta(pf.thinking_level_entry, "thinking_level_change", level)

    def user(self, text: str, image: str | None = None) -> _Rec:
        self.tick(4_000, 400_000)
        content: list[Json] = [pf.text_block(text)]
        if image is not None:
            content.append(pf.image_block(image))
        msg = pf.user_message(content, self.now - self.rng.randint(1, 40))
        rec = self._message(msg, "user", math.ceil(pf.js_len(text) / 4))
        rec.text = text
        return rec

    def custom_message(self) -> None:
        rng = self.rng
        self.tick(20, 3_000)
        kind = rng.random()
        details: Any = None
        if kind < 0.4:
            ctype = "git-context"
            body = "Current branch: fix/import-rounding\nUncommitted changes:\n"
            body += "\n".join(f" M {p}" for p in rng.sample(cp.PY_FILES, rng.randint(1, 5)))
            content: str | list[Json] = body
            display = False
        elif kind < 0.7:
            ctype = "todo-reminder"
            items = [f"- [ ] {s}" for s in rng.sample(self.corpus.sentences, rng.randint(1, 4))]
            content = [pf.text_block("Open todos:\n" + "\n".join(items))]
            display = True
            details = {"open": len(items), "source": "todo-extension"}
        else:
            ctype = "plan-mode"
            content = "Plan mode is on: describe the change and wait for approval before editing."
            display = True
        tok_text = content if isinstance(content, str) else content[0]["text"]
        rec = _Rec(self.new_id(), self._leaf(), "custom_message")
        rec.cut_ok = True
        rec.tok = math.ceil(pf.js_len(tok_text) / 4)
        rec.ctx_tok = rec.tok
        entry = pf.custom_message_entry(
            rec.id, rec.parent, self.ts(), ctype, content, display, details
        )
        self.emit(entry, rec)

    def custom_state(self) -> None:
        self.tick(10, 2_000)
        data = {"enabled": self.rng.random() < 0.5, "step": self.rng.randint(1, 9)}
        self._meta(pf.custom_entry, "custom", "plan-mode-state", data)

    def bash_execution(self) -> None:
        rng = self.rng
        self.tick(3_000, 120_000)
        cmd = rng.choice(
            (
                "git status --short",
                "git log --oneline -15",
                "pytest -q -x",
                "ls -la src/ledgerline",
                "git diff --stat",
                "npm --prefix web test",
                "python -m ledgerline import tests/fixtures/bank_export.csv --dry-run",
            )
        )
        size = int(rng.lognormvariate(6.5, 1.0) * self.scale())
        output = self.corpus.slice(self.corpus.logs, rng, max(0, size)) if size > 20 else ""
        exit_code = 0 if rng.random() < 0.8 else 1
        cancelled = rng.random() < 0.03
        truncated = len(output) > 30_000 and rng.random() < 0.5
        full_path = f"/tmp/pi-bash-{rng.getrandbits(32):08x}.log" if truncated else None
        exclude = True if rng.random() < 0.1 else None
        msg = pf.bash_execution_message(
            cmd,
            output,
            None if cancelled else exit_code,
            cancelled,
            truncated,
            self.now - rng.randint(50, 2_000),
            full_path,
            exclude,
        )
        # Excluded (!!) runs still count: pi estimates AgentMessages before convertToLlm drops them.
        self._message(msg, "bashExecution", math.ceil((len(cmd) + pf.js_len(output)) / 4))

    def label(self, target: str, text: str | None) -> None:
        self.tick(500, 30_000)
        self._meta(pf.label_entry, "label", target, text)
        if text:
            self.label_map[target] = text
        else:
            self.label_map.pop(target, None)

    def session_info(self, name: str) -> None:
        self.tick(500, 30_000)
        self._meta(pf.session_info_entry, "session_info", name)
        self.session_name = name.strip() or None

    # --- assistant steps --------------------------------------------------------------

    def _call_id(self) -> str:
        self.call_seq += 1
        rng = self.rng
        if self.model.provider == "anthropic":
            return "toolu_01" + "".join(rng.choices(_ALNUM, k=22))
        if self.model.provider == "openai":
            call = "call_" + "".join(rng.choices(_ALNUM, k=24))
            return f"{call}|fc_{rng.getrandbits(192):048x}"
        return f"call_{self.now}_{self.call_seq}"

    def _response_id(self) -> str | None:
        rng = self.rng
        if self.model.provider == "anthropic":
            return "msg_01" + "".join(rng.choices(_ALNUM, k=22))
        if self.model.provider == "openai":
            return f"resp_{rng.getrandbits(192):048x}"
        return None

    def _thinking_block(self, size: int) -> Json:
        rng = self.rng
        text = self.corpus.prose(rng, size)
        if self.model.provider == "anthropic":
            n = rng.randint(200, 1_400) & ~3
            start = rng.randrange(0, len(self.corpus.b64) - n) & ~3
            sig: str | None = self.corpus.b64[start : start + n]
        elif self.model.provider == "openai":
            enc_n = rng.randint(400, 2_000) & ~3
            start = rng.randrange(0, len(self.corpus.b64) - enc_n) & ~3
            sig = _encode(
                {
                    "type": "reasoning",
                    "id": f"rs_{rng.getrandbits(192):048x}",
                    "summary": [{"type": "summary_text", "text": text[:200]}],
                    "encrypted_content": "gAAAAA" + self.corpus.b64[start : start + enc_n],
                }
            ).decode()
        else:
            sig = None
        return pf.thinking_block(text, sig)

    def _usage(self, output_tokens: int, kind: str) -> Json:
        """Usage for a request whose prompt is the current context, as each provider reports."""
        rng = self.rng
        m = self.model
        if kind == "error":
            return pf.usage(m, 0, 0, 0, 0)
        prompt = _SYSTEM_PROMPT_TOKENS + self.context_tokens()
        prompt = int(prompt * rng.uniform(0.97, 1.06))
        if m.provider == "anthropic":
            input_ = rng.randint(1, 12)
            cache_read = min(self.cached_prefix, max(0, prompt - input_))
            cache_write = max(0, prompt - input_ - cache_read)
        elif m.provider == "openai":
            cache_read = (min(self.cached_prefix, prompt) // 128) * 128
            input_, cache_write = prompt - cache_read, 0
        else:
            cache_read = 0 if rng.random() < 0.6 else (min(self.cached_prefix, prompt) // 2)
            input_, cache_write = prompt - cache_read, 0
        self.cached_prefix = prompt
        if kind == "aborted":
            output_tokens = rng.randint(0, max(1, output_tokens))
        return pf.usage(m, input_, output_tokens, cache_read, cache_write)

    def assistant(
        self, content: list[Json], stop: str, error: str | None = None
    ) -> tuple[_Rec, Json]:
        rng = self.rng
        chars = 0
        reads: list[str] = []
        mods: list[str] = []
        for b in content:
            t = b["type"]
            if t == "text":
                chars += pf.js_len(b["text"])
            elif t == "thinking":
                chars += pf.js_len(b["thinking"])
            elif t == "toolCall":
                chars += len(b["name"]) + _tool_args_len(b["arguments"])
                p = b["arguments"].get("path")
                if isinstance(p, str):
                    if b["name"] == "read":
                        reads.append(p)
                    elif b["name"] in ("write", "edit"):
                        mods.append(p)
        tok = math.ceil(chars / 4)
        out_tokens = max(1, int(tok * rng.uniform(1.0, 1.25))) if stop != "error" else 0
        kind = "error" if stop == "error" else ("aborted" if stop == "aborted" else "ok")
        start = self.now + rng.randint(5, 400)
        self.now = start + rng.randint(800, 6_000) + out_tokens * rng.randint(8, 25)
        usage_ = self._usage(out_tokens, kind)
        resp = self._response_id() if kind != "error" else None
        msg = pf.assistant_message(self.model, content, usage_, stop, start, resp, error)
        rec = self._message(msg, "assistant", tok)
        rec.reads = tuple(reads)
        rec.mods = tuple(mods)
        if kind == "ok":
            rec.usage_total = usage_["totalTokens"]
        return rec, usage_

    def _pick_path(self) -> str:
        rng = self.rng
        p = rng.choice(cp.ALL_TEXT_FILES) if rng.random() < 0.3 else rng.choice(cp.PY_FILES)
        return f"{cp.CWD}/{p}" if rng.random() < 0.12 else p

    def _tool_call(self) -> tuple[str, Json]:
        rng = self.rng
        s = self.scale()
        r = rng.random()
        if r < 0.30:
            path = self._pick_path()
            if rng.random() < 0.015:
                path = rng.choice(cp.IMAGE_FILES)
            args: Json = {"path": path}
            if rng.random() < 0.2:
                args["offset"] = rng.randint(1, 300)
                args["limit"] = rng.choice((50, 100, 200, 400))
            return "read", args
        if r < 0.52:
            cmd = rng.choice(
                (
                    "pytest -q tests/test_importer.py",
                    "pytest -q -x --no-header",
                    "git diff",
                    "git log --oneline -20",
                    "python -m ledgerline report --period 2026-03",
                    "ls -la src/ledgerline/storage",
                    "rg -n 'round\\(' src/",
                    "npm --prefix web run build",
                    "python -c 'import ledgerline; print(ledgerline.__version__)'",
                )
            )
            args = {"command": cmd}
            if rng.random() < 0.15:
                args["timeout"] = rng.choice((60, 120, 300))
            return "bash", args
        if r < 0.70:
            old = self.corpus.slice(self.corpus.code, rng, int(rng.lognormvariate(5.3, 0.8) * s))
            comment = "    # " + rng.choice(self.corpus.sentences)
            new = old.replace("return", "return  # checked", 1) + "\n" + comment
            edits = [{"oldText": old, "newText": new}]
            if rng.random() < 0.15:
                o2 = self.corpus.slice(self.corpus.code, rng, 120)
                edits.append({"oldText": o2, "newText": o2.upper()})
            return "edit", {"path": self._pick_path(), "edits": edits}
        if r < 0.80:
            pattern = rng.choice(
                ("def parse_", "amount_cents", "TODO", "Decimal\\(", "raise \\w+Error", "useLedger")
            )
            args = {"pattern": pattern}
            if rng.random() < 0.7:
                args["path"] = rng.choice(("src", "tests", "web/src", "src/ledgerline"))
            if rng.random() < 0.3:
                args["glob"] = rng.choice(("*.py", "*.ts*"))
            return "grep", args
        if r < 0.86:
            content = self.corpus.slice(
                self.corpus.code, rng, int(rng.lognormvariate(7.0, 0.7) * s)
            )
            return "write", {"path": self._pick_path(), "content": content}
        if r < 0.92:
            args = {"pattern": rng.choice(("*.py", "test_*.py", "*.tsx", "*.md"))}
            if rng.random() < 0.5:
                args["path"] = rng.choice(("src", "tests", "web"))
            return "find", args
        if r < 0.985:
            return "ls", {"path": rng.choice(("src/ledgerline", "tests", "web/src", "."))}
        return "skill", {"name": rng.choice(cp.SKILLS)}

    def _result_size(self) -> int:
        rng = self.rng
        r = rng.random()
        if r < 0.08:
            n = rng.randint(5, 150)
        elif r < 0.90:
            n = int(min(14_000, max(200, rng.lognormvariate(math.log(1_500), 0.55))))
        elif r < 0.98:
            n = rng.randint(6_000, 20_000)
        else:
            n = rng.randint(20_000, 64_000)
        return max(4, int(n * self.scale()))

    def tool_result(self, call_id: str, name: str, args: Json) -> None:
        rng = self.rng
        c = self.corpus
        size = self._result_size()
        is_error = False
        details: Any = None
        image: str | None = None
        if name == "read":
            path = args["path"]
            rel = path.removeprefix(cp.CWD + "/")
            if rel in c.images:
                text = "Read image file [image/png]"
                image = c.images[rel]
            elif rel not in c.files or rng.random() < 0.04:
                is_error, details = True, {}
                text = f"ENOENT: no such file or directory, access '{cp.CWD}/{rel}'"
            else:
                body = c.files[rel]
                text = c.slice(body, rng, size) if len(body) > size else body
                if "limit" in args and len(body) > len(text):
                    more = body.count("\n", len(text))
                    offset = args["offset"] + args["limit"]
                    text += f"\n\n[{more} more lines in file. Use offset={offset} to continue.]"
        elif name == "bash":
            text = c.slice(c.logs, rng, size)
            if rng.random() < 0.12:
                is_error, details = True, {}
                text = f"{text}\n\nCommand exited with code {rng.choice((1, 1, 2, 127))}"
        elif name == "edit":
            path = args["path"]
            if rng.random() < 0.07:
                is_error, details = True, {}
                text = (
                    f"Could not find the exact text in {path}. The old text must match exactly "
                    "including all whitespace and newlines."
                )
            else:
                n = len(args["edits"])
                text = f"Successfully replaced {n} block(s) in {path}."
                first = rng.randint(1, 400)
                old_lines = args["edits"][0]["oldText"].split("\n")
                new_lines = args["edits"][0]["newText"].split("\n")
                w = len(str(first + len(new_lines) + 4))
                diff = [f" {str(first - 1).rjust(w)} ..."]
                diff += [f"-{str(first + i).rjust(w)} {line}" for i, line in enumerate(old_lines)]
                diff += [f"+{str(first + i).rjust(w)} {line}" for i, line in enumerate(new_lines)]
                details = {"diff": "\n".join(diff), "firstChangedLine": first}
        elif name == "write":
            text = f"Successfully wrote {len(args['content'].encode())} bytes to {args['path']}"
        elif name == "grep":
            lines = c.slice(c.code, rng, size).split("\n")
            if rng.random() < 0.1:
                text = "No matches found"
            else:
                text = "\n".join(
                    f"{rng.choice(cp.PY_FILES)}:{rng.randint(1, 900)}: {line.strip()}"
                    for line in lines
                    if line.strip()
                )
        elif name == "find":
            n = max(1, min(400, size // 30))
            text = "\n".join(rng.choice(cp.ALL_TEXT_FILES) for _ in range(n))
        elif name == "ls":
            n = max(1, min(300, size // 16))
            names = [p.rsplit("/", 1)[-1] for p in rng.sample(cp.ALL_TEXT_FILES, min(n, 30))]
            text = "\n".join(sorted(set(names)) + ["storage/", "report/", "utils/"][: n % 4])
        else:
            text = c.skill_docs[args["name"]]
        content = [pf.text_block(text)]
        chars = pf.js_len(text)
        if image is not None:
            content.append(pf.image_block(image))
            chars += 4_800
        self.tick(10, 4_000 if name != "bash" else 60_000)
        msg = pf.tool_result_message(call_id, name, content, is_error, self.now - 1, details)
        self._message(msg, "toolResult", math.ceil(chars / 4))

    # --- turns ------------------------------------------------------------------------

    def _prompt_text(self) -> str:
        rng = self.rng
        s = self.scale()
        r = rng.random()
        c = self.corpus
        if r < 0.08:
            text = rng.choice(
                (
                    "导入银行账单时金额四舍五入不对，能帮我看看 money.py 吗？",  # noqa: RUF001
                    "このテストが時々失敗します。原因を調べてください。",
                    "请把对账报告导出成 CSV，并保留原始的商户名称 (比如 北京便利店)。",  # noqa: RUF001
                )
            )
        elif r < 0.16:
            text = "Tests are failing again 😩 here's the output:\n\n" + c.slice(
                c.logs, rng, int(rng.randint(1_500, 8_000) * s)
            )
        elif r < 0.20:
            text = (
                "Here's the function I mean:\n\n```python\n"
                + c.slice(c.code, rng, int(rng.randint(800, 4_000) * s))
                + "\n```\nCan you simplify it without changing behaviour?"
            )
        elif r < 0.21:
            text = (
                "The tokenizer test prints `<|endoftext|>` literally in the summary, "
                "is that expected? See tests/fixtures/tokenizer_cases.txt"
            )
        else:
            opener = rng.choice(
                (
                    "Can you look into why",
                    "Please fix:",
                    "Next:",
                    "Hmm, that didn't work.",
                    "Good. Now",
                    "Let's refactor so that",
                    "Quick question:",
                    "Add a test where",
                )
            )
            text = opener + " " + c.prose(rng, int(rng.lognormvariate(math.log(160), 0.8) * s))
        return text

    def _maybe_between_turns(self) -> None:
        rng = self.rng
        if self.left() < 8:
            return
        r = rng.random()
        if r < 0.010:
            choices = [m for m in pf.MODELS.values() if m.id != self.model.id]
            self.model_change(rng.choice(choices))
        elif r < 0.020:
            self.thinking_change(rng.choice([t for t in pf.THINKING_LEVELS if t != self.thinking]))
        elif r < 0.045:
            self.custom_message()
        elif r < 0.055:
            self.custom_state()
        elif r < 0.095:
            self.bash_execution()
        elif r < 0.125:
            self._random_label()
        elif r < 0.128 and self.session_name is not None:
            self.session_info(rng.choice(("ledger import: rounding + CSV 🧾", "对账修复", "misc")))

    def _random_label(self) -> None:
        rng = self.rng
        n = len(self.path_recs)
        for _ in range(10):
            r = self.path_recs[rng.randrange(max(0, n - 60), n)]
            if r.kind in ("user", "assistant"):
                break
        else:
            return
        if r.id in self.label_map and rng.random() < 0.4:
            self.label(r.id, None)
        else:
            text = rng.choice(
                (
                    "checkpoint",
                    "before refactor",
                    "✅ tests green",
                    "bug repro",
                    "ベースライン",
                    "wip",
                )
            )
            self.label(r.id, text)

    def turn(self, prompt: str | None = None) -> None:
        rng = self.rng
        if self.left() < 2:
            if self.left() == 1:
                users = (r.id for r in reversed(self.path_recs) if r.kind == "user")
                self.label(next(users, self.file_order[-1]), "end of generated session")
            return
        self._maybe_between_turns()
        image = None
        if rng.random() < 0.01:
            image = self.corpus.images[rng.choice(cp.IMAGE_FILES)]
        self.user(prompt or self._prompt_text(), image)
        if self.left() > 6 and rng.random() < 0.012:
            self.custom_message()
        steps = 1 + min(40, int(rng.expovariate(1 / 5)))
        overflowed = False
        retries = 0
        for step in range(steps):
            if self.left() < 2:
                break
            if (
                self.compactions
                and not overflowed
                and self.left() > 4
                and _SYSTEM_PROMPT_TOKENS + self.context_tokens() > self.threshold * 1.02
                and rng.random() < 0.3
            ):
                overflowed = True
                self._overflow()
                continue
            r = rng.random()
            if self.left() > 3 and retries < 2 and r < 0.015:
                retries += 1
                self.assistant([], "error", self._provider_error())
                continue
            if r < 0.035 and step > 0:
                self._aborted_step()
                return
            n_calls = 1 if rng.random() < 0.75 else rng.randint(2, 4)
            if step == steps - 1 or self.left() < n_calls + 2:
                break
            self._tool_step(n_calls)
        if self.left() >= 1:
            self._final_answer()
        if (
            self.compactions
            and self.left() >= 1
            and _SYSTEM_PROMPT_TOKENS + self.context_tokens() > self.threshold
        ):
            self.compact()
        if self.session_name is None and self.left() > 3:
            self.session_info(rng.choice(("Fix rounding in bank import", "ledger import fixes")))

    def _tool_step(self, n_calls: int) -> None:
        rng = self.rng
        s = self.scale()
        content: list[Json] = []
        if self.thinking != "off" and rng.random() < 0.7:
            content.append(self._thinking_block(int(rng.lognormvariate(math.log(350), 0.8) * s)))
        if rng.random() < 0.45:
            content.append(pf.text_block(self.corpus.prose(rng, int(rng.randint(40, 300) * s))))
        calls = []
        for _ in range(n_calls):
            name, args = self._tool_call()
            cid = self._call_id()
            calls.append((cid, name, args))
            content.append(pf.tool_call_block(cid, name, args))
        self.assistant(content, "toolUse")
        for cid, name, args in calls:
            self.tool_result(cid, name, args)

    def _final_answer(self) -> None:
        rng = self.rng
        s = self.scale()
        content: list[Json] = []
        if self.thinking != "off" and rng.random() < 0.5:
            content.append(self._thinking_block(int(rng.lognormvariate(math.log(250), 0.7) * s)))
        body = self.corpus.prose(rng, int(rng.lognormvariate(math.log(600), 0.7) * s))
        if rng.random() < 0.5:
            bullets = "\n".join(f"- {x}" for x in rng.sample(self.corpus.sentences, 3))
            body = f"{body}\n\nChanges:\n{bullets}"
        if rng.random() < 0.1:
            body += "\n\n✅ All tests pass."
        content.append(pf.text_block(body))
        self.assistant(content, "stop")

    def _aborted_step(self) -> None:
        rng = self.rng
        content: list[Json] = []
        if self.thinking != "off" and rng.random() < 0.6:
            content.append(self._thinking_block(rng.randint(20, 300)))
        else:
            content.append(pf.text_block(self.corpus.prose(rng, rng.randint(10, 200))))
        self.assistant(content, "aborted", "Request was aborted")

    def _provider_error(self) -> str:
        rng = self.rng
        req = "req_011C" + "".join(rng.choices(_ALNUM, k=16))

        def api_error(status: int, kind: str, message: str) -> str:
            body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": req}
            return f"{status} {_encode(body).decode()}"

        return rng.choice(
            (
                api_error(529, "overloaded_error", "Overloaded"),
                api_error(
                    429,
                    "rate_limit_error",
                    "This request would exceed your organization's rate limit of 450,000 input "
                    "tokens per minute.",
                ),
                "Connection error.",
                "terminated",
                api_error(500, "api_error", "Internal server error"),
            )
        )

    def _overflow(self) -> None:
        """pi's overflow path: the provider rejects the prompt, pi compacts and retries."""
        tokens = _SYSTEM_PROMPT_TOKENS + self.context_tokens()
        req = "req_011C" + "".join(self.rng.choices(_ALNUM, k=16))
        err = (
            '400 {"type":"error","error":{"type":"invalid_request_error","message":'
            f'"prompt is too long: {tokens} tokens > {self.threshold} maximum"}},'
            f'"request_id":"{req}"}}'
        )
        self.assistant([], "error", err)
        self.compact()

    # --- compaction -------------------------------------------------------------------

    def _tokens_before(self) -> int:
        """estimateContextTokens(buildSessionContext(path).messages).tokens, as pi computes."""
        recs = self.path_recs
        order: list[_Rec] = []
        if self.comps:
            ci, fk = self.comps[-1]
            if 0 <= fk < ci:
                order = recs[fk:ci]
            tail = recs[ci + 1 :]
        else:
            tail = recs
        trailing = 0
        for seq in (tail, order):
            for r in reversed(seq):
                if r.usage_total:
                    return r.usage_total + trailing
                trailing += r.ctx_tok
        summary_tok = recs[self.comps[-1][0]].tok if self.comps else 0
        return trailing + summary_tok

    def compact(self) -> None:
        recs = self.path_recs
        end = len(recs)
        prev_ci, prev_fk = self.comps[-1] if self.comps else (-1, -1)
        start = prev_fk if prev_fk >= 0 else prev_ci + 1
        # pi's findCutPoint over [start, end) with the generator's keep_recent_tokens.
        cut_points = [i for i in range(start, end) if recs[i].cut_ok]
        if not cut_points:
            return
        cut = cut_points[0]
        acc = 0
        for i in range(end - 1, start - 1, -1):
            if not recs[i].is_msg:
                continue
            acc += recs[i].tok
            if acc >= self.keep:
                cut = next((c for c in cut_points if c >= i), cut)
                break
        while cut > start and not recs[cut - 1].is_msg and recs[cut - 1].kind != "compaction":
            cut -= 1
        is_user = recs[cut].kind == "user"
        turn_start = -1
        if not is_user:
            for i in range(cut, start - 1, -1):
                if recs[i].kind in ("user", "bashExecution", "custom_message", "branch_summary"):
                    turn_start = i
                    break
        split = not is_user and turn_start != -1
        history_end = turn_start if split else cut

        read: set[str] = set()
        modified: set[str] = set()
        if prev_ci >= 0 and recs[prev_ci].details is not None:
            pr, pm = recs[prev_ci].details  # type: ignore[misc]
            read.update(pr)
            modified.update(pm)
        topics: list[str] = []
        for i in range(start, cut):
            r = recs[i]
            # Summarized history and the split turn's prefix together cover [start, cut).
            read.update(r.reads)
            modified.update(r.mods)
            if r.kind == "user" and i < history_end:
                topics.append(r.text)
        read_files, modified_files = pf.file_lists(read, modified)
        summary = self._summary_text(topics, modified_files, previous=prev_ci >= 0)
        if split:
            summary += "\n\n---\n\n**Turn Context (split turn):**\n\n" + self._turn_prefix_text(
                recs[turn_start].text
            )
        summary += pf.format_file_operations(read_files, modified_files)
        tokens_before = self._tokens_before()
        self.tick(15_000, 90_000)
        rec = _Rec(self.new_id(), self._leaf(), "compaction")
        rec.tok = math.ceil(pf.js_len(summary) / 4)
        rec.details = (read_files, modified_files)
        rec.text = recs[cut].id
        entry = pf.compaction_entry(
            rec.id,
            rec.parent,
            self.ts(),
            summary,
            recs[cut].id,
            tokens_before,
            {"readFiles": read_files, "modifiedFiles": modified_files},
        )
        self.emit(entry, rec)
        self._register_compaction(rec)
        self.cached_prefix = 0

    def _summary_text(self, topics: list[str], modified: list[str], previous: bool) -> str:
        rng = self.rng
        s = self.corpus.sentences
        goals = [t.split("\n", 1)[0][:160] for t in topics[-4:]] or ["Continue the ledger fixes"]
        done = "\n".join(f"- [x] {x}" for x in rng.sample(s, rng.randint(2, 6)))
        mods = ", ".join(f"`{m}`" for m in modified[:6]) or "no files yet"
        parts = [
            "## Goal\n" + "\n".join(f"- {g}" for g in goals),
            "## Constraints & Preferences\n- Keep the public CLI unchanged\n- Amounts stay in "
            "integer cents (注意: 金额以分为单位存储)",
            f"## Progress\n### Done\n{done}\n\n### In Progress\n- [ ] {rng.choice(s)}\n\n"
            "### Blocked\n- (none)",
            f"## Key Decisions\n- **Touch only what is needed**: changed {mods}",
            "## Next Steps\n"
            + "\n".join(f"{i}. {x}" for i, x in enumerate(rng.sample(s, 3), start=1)),
            f"## Critical Context\n- {rng.choice(s)}"
            + ("\n- Earlier work is carried over from the previous summary." if previous else ""),
        ]
        return "\n\n".join(parts)

    def _turn_prefix_text(self, request: str) -> str:
        rng = self.rng
        return (
            f"## Original Request\n{request.split(chr(10), 1)[0][:300]}\n\n"
            f"## Early Progress\n- {rng.choice(self.corpus.sentences)}\n\n"
            f"## Context for Suffix\n- {rng.choice(self.corpus.sentences)}"
        )

    # --- tree navigation ---------------------------------------------------------------

    def _nav_gap(self, first: bool = False) -> int:
        mean = max(25, min(200, self.n_target // 10))
        base = int(self.n_target * 0.08) if first else 0
        return base + self.rng.randint(mean // 2, mean * 3 // 2)

    def maybe_navigate(self) -> None:
        if not self.branchy or self.n_written < self.next_nav or self.left() < 6:
            return
        self.next_nav = self.n_written + self._nav_gap()
        rng = self.rng
        old_leaf = self.path_recs[-1]
        target: _Rec
        if self.abandoned and rng.random() < 0.12:
            target = self.recs[rng.choice(self.abandoned)]
            on_path = target.id in self.index_of
        else:
            n = len(self.path_recs)
            lo = max(1, n - 80)
            want = "user" if rng.random() < 0.65 else "assistant"
            picks = (self.path_recs[rng.randrange(lo, max(lo + 1, n - 2))] for _ in range(40))
            found = next((r for r in picks if r.kind == want), None)
            if found is None:
                return
            target = found
            on_path = True
        if target.id == old_leaf.id:
            return
        self.navigations.append((old_leaf.id, target.id))
        self.abandoned.append(old_leaf.id)

        # The abandoned segment: old leaf back to the deepest common ancestor, exclusive.
        if on_path:
            common = self.index_of[target.id]
            segment = self.path_recs[common + 1 :]
        else:
            cur: str | None = target.id
            while cur is not None and cur not in self.index_of:
                cur = self.recs[cur].parent
            common = self.index_of[cur] if cur is not None else -1
            segment = self.path_recs[common + 1 :]

        # navigateTree: a user or custom message goes back to the editor, so the leaf is its
        # parent; any other target becomes the leaf itself.
        new_leaf = target.parent if target.kind in ("user", "custom_message") else target.id
        if new_leaf is None:
            self._truncate(0)
        elif on_path or new_leaf in self.index_of:
            self._truncate(self.index_of[new_leaf] + 1)
        else:
            self._rebuild_path(new_leaf)
        self.cached_prefix = 0

        has_messages = any(r.is_msg or r.kind == "compaction" for r in segment)
        summarize = has_messages and rng.random() < 0.75
        label = (
            rng.choice(("alt approach", "retry", "🔀 branch", "before revert"))
            if (rng.random() < 0.2)
            else None
        )
        if summarize:
            summary_rec = self._branch_summary(segment)
            if label:
                self.label(summary_rec.id, label)
        elif label:
            self.label(target.id, label)
        if target.kind == "user":
            again = target.text.rstrip() + rng.choice(
                (
                    "\n\nActually, keep the old behaviour behind a flag.",
                    " — but do it without touching the parser this time.",
                    "\n\n(Second try: smaller change please.)",
                )
            )
            self.turn(again)

    def _branch_summary(self, segment: list[_Rec]) -> _Rec:
        read: set[str] = set()
        modified: set[str] = set()
        topics: list[str] = []
        for r in segment:
            if r.kind == "branch_summary" and r.details is not None:
                read.update(r.details[0])
                modified.update(r.details[1])
            read.update(r.reads)
            modified.update(r.mods)
            if r.kind == "user":
                topics.append(r.text)
        read_files, modified_files = pf.file_lists(read, modified)
        body = self._summary_text(topics, modified_files, previous=False)
        body = body.split("\n\n## Critical Context", 1)[0]
        summary = (
            pf.BRANCH_SUMMARY_PREAMBLE
            + body
            + pf.format_file_operations(read_files, modified_files)
        )
        self.tick(8_000, 40_000)
        rec = _Rec(self.new_id(), self._leaf(), "branch_summary")
        rec.cut_ok = True
        rec.tok = math.ceil(pf.js_len(summary) / 4)
        rec.ctx_tok = rec.tok
        rec.details = (read_files, modified_files)
        details = {"readFiles": read_files, "modifiedFiles": modified_files}
        self.emit(pf.branch_summary_entry(rec.id, rec.parent, self.ts(), summary, details), rec)
        return rec

    # --- driver -----------------------------------------------------------------------

    def run(self) -> GeneratedInfo:
        t0 = time.perf_counter()
        self._write_line(pf.header(self.session_id, pf.iso(self.now), cp.CWD))
        self.tick(3, 40)
        self.model_change(self.model)
        self.thinking_change(self.thinking)
        while self.left() > 0:
            before = self.n_written
            self.turn()
            self.maybe_navigate()
            if self.n_written == before:
                # Nothing fits any more (e.g. one entry left after a navigation).
                self._meta(pf.custom_entry, "custom", "generator-padding", None)
        if self.buf:
            self.out.write(b"".join(self.buf))
        self.out.close()

        leaf_ids = [i for i in self.file_order if self.children.get(i, 0) == 0]
        info = GeneratedInfo(
            path=str(self.path),
            session_id=self.session_id,
            seed=self.seed,
            entries=self.n_written,
            bytes=self.bytes,
            seconds=round(time.perf_counter() - t0, 3),
            leaf_id=self.file_order[-1],
            counts=dict(sorted(self.counts.items())),
            roles=dict(sorted(self.roles.items())),
            branch_point_ids=[i for i in self.file_order if self.children.get(i, 0) >= 2],
            leaf_ids=leaf_ids,
            branch_summary_ids=[
                i for i in self.file_order if self.recs[i].kind == "branch_summary"
            ],
            compaction_ids=[i for i in self.file_order if self.recs[i].kind == "compaction"],
            navigations=self.navigations,
            labels=dict(self.label_map),
            session_name=self.session_name,
            keep_recent_tokens=self.keep,
            compaction_threshold=self.threshold,
            models=self.models_used,
        )
        return info


def generate(
    path: str | Path,
    entries: int = 1_000,
    *,
    branchy: bool = False,
    compactions: bool = False,
    avg_bytes: int = 2_000,
    seed: int = 0,
    compaction_threshold: int | None = None,
    keep_recent_tokens: int | None = None,
    start_ms: int = _DEFAULT_START_MS,
) -> GeneratedInfo:
    """Write a session of exactly ``entries`` entries (plus the header) to ``path``.

    The same arguments always give the same bytes. ``compaction_threshold`` is the context
    size (in estimated tokens, system prompt included) above which a compaction is written;
    by default it shrinks for small files so that they still get several. ``keep_recent_tokens``
    is the budget used to place each compaction's ``firstKeptEntryId`` (pi's ``findCutPoint``
    rule); by default a quarter of the threshold, at most pi's 20,000.

    ``avg_bytes`` is met within about 10 % between roughly 1,500 and 6,000 bytes per entry.
    Below that, the fixed part of each entry (ids, usage, signatures) dominates, so files come
    out at about 900+ bytes per entry; far above it, tool output is bounded by the sizes of
    the fictional project's files (about 15 KB per entry for ``avg_bytes=20_000``).
    """
    if entries < 3:
        raise ValueError("entries must be at least 3 (model, thinking level, one message)")
    gen = _Generator(
        Path(path),
        entries,
        branchy,
        compactions,
        max(200, avg_bytes),
        seed,
        compaction_threshold,
        keep_recent_tokens,
        start_ms,
    )
    return gen.run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--entries", type=int, default=1_000, help="entries after the header")
    ap.add_argument("--branchy", action="store_true", help="navigate back in the tree now and then")
    ap.add_argument("--compactions", action="store_true", help="write compaction entries")
    ap.add_argument("--avg-bytes", type=int, default=2_000, help="target bytes per entry")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compaction-threshold", type=int, default=None)
    ap.add_argument("--keep-recent-tokens", type=int, default=None)
    ap.add_argument("--out", required=True, help="path of the .jsonl file to write")
    ap.add_argument("--info", action="store_true", help="print the full GeneratedInfo as JSON")
    a = ap.parse_args(argv)
    info = generate(
        a.out,
        a.entries,
        branchy=a.branchy,
        compactions=a.compactions,
        avg_bytes=a.avg_bytes,
        seed=a.seed,
        compaction_threshold=a.compaction_threshold,
        keep_recent_tokens=a.keep_recent_tokens,
    )
    if a.info:
        print(info.to_json())
    else:
        print(
            f"{info.path}: {info.entries} entries, {info.bytes / 1e6:.1f} MB, "
            f"{len(info.branch_point_ids)} branch points, {len(info.compaction_ids)} compactions, "
            f"{info.seconds:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
