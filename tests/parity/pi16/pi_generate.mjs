#!/usr/bin/env node
// Writes a session file with pi 1.6.0's own SessionManager: a seeded random walk that uses
// every entry and message pi 1.6 writes, on many branches.
//
//   node pi_generate.mjs OUT.jsonl [--seed N] [--steps N] [--keep N] [--nulls P]
//
// What it appends, through pi's own append* methods: user messages (some with images,
// and with --nulls P a share P of messages with null content), assistant answers (text, thinking, tool calls, thinkingLevel,
// all-zero usage, errors and aborts), tool results (some with nestedCalls), system
// messages (content, sections replaced and removed, toolsAdded, toolsRemoved), shell runs,
// custom messages (with --nulls, some without content), context edits (omissions and replacements,
// string and block content, an omitted failed attempt after an overflow), usage entries,
// compactions placed by pi's own prepareCompaction (their systemMessage checkpoint is
// pi's; some retain nothing, some keep a range holding an older compaction), branch
// summaries with usage (some empty) whose fromId is the old leaf, labels, model and
// thinking changes, and moves of the leaf to earlier entries. Prints {"path", "entries",
// "leaves"} on stdout. The file is pi's: the script writes nothing itself.

import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const core = join(here, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "core");
// The package index needs Node 22; these modules load on Node 20 (see README.md).
const { SessionManager } = await import(join(core, "session-manager.js"));
const { prepareCompaction } = await import(join(core, "compaction", "index.js"));

const args = process.argv.slice(2);
const out = args[0];
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
if (!out) {
  console.error("usage: node pi_generate.mjs OUT.jsonl [--seed N] [--steps N] [--keep N]");
  process.exit(2);
}
const seed = option("seed", 1);
const steps = option("steps", 220);
const keep = option("keep", 300);
// pi 1.6 reads null content in a context; its branch summaries fail on it (estimateTokens
// reads the raw message), so sessions for those comparisons are made without.
const nulls = option("nulls", 0);

// mulberry32: a small seeded generator, so a seed gives the same walk every time.
let state = seed >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (items) => items[Math.floor(random() * items.length)];
const chance = (p) => random() < p;
const words = ["table", "anchor", "slug", "fence", "heading", "parser", "cache", "render", "test", "fix"];
const text = (n) => Array.from({ length: n }, () => pick(words)).join(" ");
let clock = Date.UTC(2026, 10, 20, 9, 0, 0);
const now = () => (clock += 1000);

const usage = (input, output = 40) => ({
  input,
  output,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: input + output,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});
const zeroUsage = () => usage(0, 0);
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const tools = ["read", "write", "edit", "bash"].map((name) => ({
  name,
  description: `The ${name} tool.`,
  parameters: { type: "object", properties: { path: { type: "string" } } },
}));

const work = mkdtempSync(join(tmpdir(), "pi16-generate-"));
try {
  const sessionDir = join(work, "sessions");
  mkdirSync(sessionDir, { recursive: true });
  const manager = SessionManager.create(join(work, "project"), sessionDir);
  let sent = 0; // answers sent so far: the measured usage grows with the conversation
  let callId = 0;

  const branch = () => manager.getBranch();
  const editable = () =>
    branch().filter(
      (e) =>
        e.type === "custom_message" ||
        (e.type === "message" && ["user", "assistant", "toolResult"].includes(e.message.role)),
    );

  function user() {
    const roll = random();
    const content =
      chance(nulls)
        ? null
        : roll < 0.15
          ? [{ type: "text", text: text(8) }, { type: "image", data: pixel, mimeType: "image/png" }]
          : roll < 0.3
            ? [{ type: "text", text: text(12) }]
            : text(6 + Math.floor(random() * 40));
    manager.appendMessage({ role: "user", content, timestamp: now() });
  }

  function answer({ calls = 0, stopReason } = {}) {
    sent += 1;
    const content = [];
    if (chance(0.3)) content.push({ type: "thinking", thinking: text(10), thinkingSignature: "sig" });
    if (calls === 0 || chance(0.5)) content.push({ type: "text", text: text(5 + Math.floor(random() * 60)) });
    const ids = [];
    for (let i = 0; i < calls; i++) {
      const id = `call_${++callId}`;
      ids.push(id);
      const name = pick(["read", "write", "edit", "bash"]);
      const args = name === "bash" ? { command: `ls ${pick(words)}` } : { path: `src/${pick(words)}.md` };
      content.push({ type: "toolCall", id, name, arguments: args });
    }
    const reason = stopReason ?? (calls > 0 ? "toolUse" : "stop");
    const message = {
      role: "assistant",
      content: chance(nulls) ? null : content,
      api: "anthropic-messages",
      provider: "anthropic",
      model: pick(["claude-sonnet-4-5", "claude-opus-4-1"]),
      usage: reason === "error" || reason === "aborted" || chance(0.05) ? zeroUsage() : usage(800 + sent * 90),
      stopReason: reason,
      timestamp: now(),
    };
    if (chance(0.5)) message.thinkingLevel = pick(["off", "low", "high"]);
    if (reason === "error") message.errorMessage = "prompt is too long: 210000 tokens > 200000 maximum";
    manager.appendMessage(message);
    return ids;
  }

  function results(ids) {
    for (const id of ids) {
      const message = {
        role: "toolResult",
        toolCallId: id,
        toolName: "bash",
        content: chance(nulls) ? null : [{ type: "text", text: text(10 + Math.floor(random() * 200)) }],
        isError: chance(0.1),
        timestamp: now(),
      };
      if (chance(0.15)) {
        message.nestedCalls = {
          calls: [{ id: `n${id}`, name: pick(["read", "write", "edit"]), arguments: { path: `lib/${pick(words)}.ts` } }],
        };
      }
      manager.appendMessage(message);
    }
  }

  function system() {
    const message = { role: "system", content: chance(0.5) ? "" : text(6), timestamp: now() };
    if (chance(0.6)) {
      message.sections = { [pick(["preamble", "skills", "cwd"])]: chance(0.25) ? null : text(8) };
    }
    if (chance(0.4)) message.toolsAdded = [pick(tools)];
    if (chance(0.2)) message.toolsRemoved = [{ name: pick(tools).name }];
    if (chance(nulls)) message.content = null;
    manager.appendMessage(message);
  }

  function edit() {
    const targets = editable();
    if (targets.length === 0) return;
    const target = pick(targets);
    const roll = random();
    const replacement =
      roll < 0.45
        ? null
        : roll < 0.8
          ? { content: text(3) }
          : { content: [{ type: "text", text: `[edited] ${text(2)}` }] };
    manager.appendContextEdit(target.id, replacement);
  }

  function compact() {
    const path = branch();
    if (path.length === 0 || path[path.length - 1].type === "compaction") return;
    const roll = random();
    if (roll < 0.12) {
      // An extension's compaction that keeps nothing (pi writes its own id).
      manager.appendCompaction(`Summary (keeps nothing): ${text(20)}`, undefined, 5000, undefined, true);
      return;
    }
    if (roll < 0.25) {
      // An extension's compaction that keeps a range of its choice (maybe over an older one).
      const from = pick(path.slice(Math.max(0, path.length - 30)));
      manager.appendCompaction(`Summary (hook): ${text(20)}`, from.id, 6000, undefined, true);
      return;
    }
    const prepared = prepareCompaction(path, { enabled: true, reserveTokens: 16384, keepRecentTokens: keep });
    if (!prepared) return;
    const { readFiles, modifiedFiles } = { readFiles: [...prepared.fileOps.read].sort(), modifiedFiles: [...prepared.fileOps.edited].sort() };
    manager.appendCompaction(
      `## Goal\n${text(15)}`,
      prepared.firstKeptEntryId,
      prepared.tokensBefore,
      { readFiles, modifiedFiles },
      false,
      usage(3000, 400),
    );
  }

  function navigate() {
    const entries = manager.getEntries();
    const target = pick(entries);
    if (chance(0.5)) {
      const summary = chance(0.15) ? "" : `The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n${text(25)}`;
      manager.branchWithSummary(target.id, summary, { readFiles: [], modifiedFiles: [`src/${pick(words)}.md`] }, false, usage(1500, 200));
    } else {
      manager.branch(target.id);
    }
  }

  user();
  system();
  for (let step = 0; step < steps; step++) {
    const roll = random();
    if (roll < 0.18) user();
    else if (roll < 0.4) results(answer({ calls: chance(0.55) ? 1 + Math.floor(random() * 3) : 0 }));
    else if (roll < 0.45) {
      // An overflow: the failed attempt is omitted with an edit, as pi 1.6's recovery does.
      user();
      const failed = answer({ stopReason: "error" });
      void failed;
      const attempt = manager.getLeafEntry();
      manager.appendContextEdit(attempt.id, null);
    } else if (roll < 0.48) answer({ stopReason: "aborted" });
    else if (roll < 0.54) system();
    else if (roll < 0.62) edit();
    else if (roll < 0.65)
      manager.appendUsage("cache_warm", "anthropic", "claude-sonnet-4-5", usage(0, 0), chance(0.5) ? "warm" : undefined);
    else if (roll < 0.72) compact();
    else if (roll < 0.79) navigate();
    else if (roll < 0.82)
      manager.appendMessage({
        role: "bashExecution",
        command: `grep -n ${pick(words)} README.md`,
        output: chance(0.3) ? "" : text(20),
        exitCode: pick([0, 1, undefined]),
        cancelled: chance(0.1),
        truncated: false,
        timestamp: now(),
      });
    else if (roll < 0.86)
      manager.appendCustomMessageEntry("note", chance(nulls) ? undefined : text(10), chance(0.5), { k: 1 });
    else if (roll < 0.88) manager.appendLabelChange(pick(manager.getEntries()).id, chance(0.8) ? text(1) : undefined);
    else if (roll < 0.9) manager.appendThinkingLevelChange(pick(["off", "low", "high"]));
    else if (roll < 0.92) manager.appendModelChange(pick(["anthropic", "openai"]), pick(["m1", "m2"]));
    else user();
  }
  // End on an answer so the file's leaf is a normal turn end.
  user();
  answer();

  const files = readdirSync(sessionDir).filter((name) => name.endsWith(".jsonl"));
  if (files.length !== 1) throw new Error(`expected one session file, found ${files.length}`);
  copyFileSync(join(sessionDir, files[0]), out);
  const entries = manager.getEntries();
  const parents = new Set(entries.map((e) => e.parentId));
  console.log(
    JSON.stringify({ path: out, entries: entries.length, leaves: entries.filter((e) => !parents.has(e.id)).length }),
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
