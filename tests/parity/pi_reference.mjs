#!/usr/bin/env node
// Runs pi 0.73.1's own session/compaction functions on a session file and prints one JSON
// document with their results (schema: README.md beside this file). sessiond's parity tests
// compare their own answers with this document.
//
// Usage:
//   node pi_reference.mjs SESSION.jsonl [--options FILE | --options-json JSON | --options -]
//                         [--out FILE] [--pretty]
//
// pi is used as a black box: everything below calls functions from the installed package.
// The session file is never touched: pi rewrites files it considers invalid or old, so it is
// given a copy in a temporary directory.

import { createHash } from "node:crypto";
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const PI_DIST = new URL("./node_modules/@mariozechner/pi-coding-agent/dist/", import.meta.url);
const PI_PACKAGE_JSON = new URL("./node_modules/@mariozechner/pi-coding-agent/package.json", import.meta.url);
const EXPECTED_PI_VERSION = "0.73.1";
const SCHEMA_VERSION = 1;

function fail(message, code = 2) {
  process.stderr.write(`pi_reference: ${message}\n`);
  process.exit(code);
}

function parseArgs(argv) {
  const args = { sessionPath: undefined, options: {}, pretty: false, outPath: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--pretty") args.pretty = true;
    else if (a === "--options") {
      const src = argv[++i];
      const text = src === "-" ? readFileSync(0, "utf8") : readFileSync(src, "utf8");
      args.options = text.trim() ? JSON.parse(text) : {};
    } else if (a === "--options-json") args.options = JSON.parse(argv[++i]);
    else if (a === "--out") args.outPath = argv[++i];
    else if (a === "-h" || a === "--help") {
      process.stdout.write(
        "usage: node pi_reference.mjs SESSION.jsonl [--options FILE|-] [--options-json JSON] [--out FILE] [--pretty]\n",
      );
      process.exit(0);
    } else if (args.sessionPath === undefined) args.sessionPath = a;
    else fail(`unexpected argument: ${a}`);
  }
  if (!args.sessionPath) fail("missing SESSION.jsonl argument");
  return args;
}

// Not every function below is re-exported from the package root (prepareCompaction and
// estimateContextTokens are not), so the modules are loaded from dist/ directly. The root
// index re-exports these same module objects, so the functions are identical; loading the
// modules alone also avoids importing the TUI (2.3 s instead of 0.6 s).
const sm = await import(new URL("core/session-manager.js", PI_DIST));
const comp = await import(new URL("core/compaction/index.js", PI_DIST));
const msgs = await import(new URL("core/messages.js", PI_DIST));
const piAi = await import("@mariozechner/pi-ai");

const { SessionManager, buildSessionContext } = sm;
const {
  DEFAULT_COMPACTION_SETTINGS,
  calculateContextTokens,
  collectEntriesForBranchSummary,
  computeFileLists,
  estimateContextTokens,
  estimateTokens,
  findCutPoint,
  formatFileOperations,
  getLastAssistantUsage,
  prepareBranchEntries,
  prepareCompaction,
  serializeConversation,
  shouldCompact,
} = comp;
const { convertToLlm } = msgs;
const { isContextOverflow } = piAi;

const { sessionPath, options, pretty, outPath } = parseArgs(process.argv.slice(2));
const piVersion = JSON.parse(readFileSync(PI_PACKAGE_JSON, "utf8")).version;

// --- document ---------------------------------------------------------------------------

function buildDocument(manager, rewrittenContent) {
  const entries = manager.getEntries();
  const byId = new Map(entries.map((e) => [e.id, e]));
  const leafId = manager.getLeafId();
  const branch = manager.getBranch();
  const index = new EntryIndex(entries);
  const contextWindow = options.contextWindow ?? 200000;
  const includeMessages = options.includeMessages ?? true;

  const doc = {
    schemaVersion: SCHEMA_VERSION,
    pi: { package: "@mariozechner/pi-coding-agent", version: piVersion, node: process.version },
    input: { path: sessionPath, options },
    file: {
      rewritten: rewrittenContent !== null,
      rewrittenContent: rewrittenContent !== null && rewrittenContent.length <= 1_000_000 ? rewrittenContent : null,
    },
    header: manager.getHeader(),
    sessionId: manager.getSessionId(),
    entryCount: entries.length,
    entries: entries.map((e) => ({ id: e.id, parentId: e.parentId, type: e.type })),
    leafId,
    branch: branch.map((e) => e.id),
    sessionName: manager.getSessionName() ?? null,
    labels: labelMap(manager, entries),
    tree: treeOf(manager),
  };
  if (options.includeEntries) doc.loadedEntries = entries;

  const leaves = [leafId, ...(options.leaves ?? [])];
  doc.contexts = leaves.map((leaf) => contextReport(entries, byId, index, leaf, includeMessages));
  const lastUsage = getLastAssistantUsage(branch);
  doc.lastAssistantUsage = lastUsage
    ? { usage: lastUsage, calculateContextTokens: calculateContextTokens(lastUsage) }
    : null;

  const mainTokens = doc.contexts[0].estimateContextTokens.tokens;
  const settingsList = options.compactionSettings ?? [DEFAULT_COMPACTION_SETTINGS];
  const shouldCases = options.shouldCompact ?? defaultShouldCompactCases(mainTokens, contextWindow, settingsList[0]);
  doc.shouldCompact = shouldCases.map((c) => ({
    contextTokens: c.contextTokens,
    contextWindow: c.contextWindow,
    settings: c.settings,
    result: shouldCompact(c.contextTokens, c.contextWindow, c.settings),
  }));

  doc.prepareCompaction = settingsList.map((s) => prepareReport(branch, s, index, includeMessages));
  const cutCases = options.findCutPoint ?? defaultCutCases(branch);
  doc.findCutPoint = cutCases.map((c) => {
    const start = c.startIndex ?? 0;
    const end = c.endIndex ?? branch.length;
    const r = findCutPoint(branch, start, end, c.keepRecentTokens);
    return {
      startIndex: start,
      endIndex: end,
      keepRecentTokens: c.keepRecentTokens,
      ...r,
      firstKeptEntryId: branch[r.firstKeptEntryIndex]?.id ?? null,
      turnStartEntryId: r.turnStartIndex >= 0 ? (branch[r.turnStartIndex]?.id ?? null) : null,
    };
  });

  if (options.replayCompactions ?? true) {
    const keep = options.replayKeepRecentTokens ?? DEFAULT_COMPACTION_SETTINGS.keepRecentTokens;
    const replaySettings = { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: keep };
    doc.compactionReplays = entries
      .filter((e) => e.type === "compaction")
      .map((c) => {
        const prep = c.parentId ? prepareCompaction(manager.getBranch(c.parentId), replaySettings) : undefined;
        return {
          compactionId: c.id,
          parentId: c.parentId,
          settings: replaySettings,
          stored: { firstKeptEntryId: c.firstKeptEntryId, tokensBefore: c.tokensBefore },
          prepared: prep
            ? { firstKeptEntryId: prep.firstKeptEntryId, isSplitTurn: prep.isSplitTurn, tokensBefore: prep.tokensBefore }
            : null,
        };
      });
  }

  const pairs = options.branchPairs ?? defaultBranchPairs(manager, entries, branch, leafId);
  const budgets = options.branchTokenBudgets ?? [0, 2000];
  doc.branchSummaries = pairs.map(([oldLeafId, targetId]) => {
    const collected = collectEntriesForBranchSummary(manager, oldLeafId, targetId);
    return {
      oldLeafId,
      targetId,
      commonAncestorId: collected.commonAncestorId,
      entryIds: collected.entries.map((e) => e.id),
      prepared: budgets.map((budget) => {
        const p = prepareBranchEntries(collected.entries, budget);
        const lists = computeFileLists(p.fileOps);
        return {
          tokenBudget: budget,
          messages: p.messages.map((m) => index.describe(m, collected.entries, includeMessages)),
          totalTokens: p.totalTokens,
          fileOps: fileOpsJson(p.fileOps),
          fileLists: lists,
          formattedFileOperations: formatFileOperations(lists.readFiles, lists.modifiedFiles),
          serialized: serializeConversation(convertToLlm(p.messages)),
        };
      }),
    };
  });

  doc.overflow = overflowReport(entries, contextWindow);
  return doc;
}

function contextReport(entries, byId, index, leaf, includeMessages) {
  const ctx = buildSessionContext(entries, leaf, byId);
  const pathEntries = leaf === null ? [] : pathOf(entries, byId, leaf);
  const llm = convertToLlm(ctx.messages);
  return {
    leafId: leaf,
    resolvedLeafId: pathEntries.length ? pathEntries[pathEntries.length - 1].id : null,
    thinkingLevel: ctx.thinkingLevel,
    model: ctx.model,
    messageCount: ctx.messages.length,
    messages: ctx.messages.map((m) => ({
      ...index.describe(m, pathEntries, includeMessages),
      estimateTokens: estimateTokens(m),
    })),
    estimateContextTokens: estimateContextTokens(ctx.messages),
    llmMessageCount: llm.length,
    llmRoles: llm.map((m) => m.role),
  };
}

// buildSessionContext's own rule for finding the path: an unknown or missing leaf id means the
// last entry; parent links are followed until one is missing.
function pathOf(entries, byId, leaf) {
  let cur = (leaf !== undefined && byId.get(leaf)) || entries[entries.length - 1];
  const path = [];
  while (cur) {
    path.push(cur);
    cur = cur.parentId ? byId.get(cur.parentId) : undefined;
  }
  return path.reverse();
}

function prepareReport(branch, settings, index, includeMessages) {
  const prep = prepareCompaction(branch, settings);
  if (!prep) {
    const last = branch[branch.length - 1];
    return { settings, result: null, reason: last?.type === "compaction" ? "alreadyCompacted" : "noFirstKeptEntry" };
  }
  const lists = computeFileLists(prep.fileOps);
  const firstKeptIndex = branch.findIndex((e) => e.id === prep.firstKeptEntryId);
  return {
    settings,
    result: {
      firstKeptEntryId: prep.firstKeptEntryId,
      firstKeptEntryIndex: firstKeptIndex,
      isSplitTurn: prep.isSplitTurn,
      tokensBefore: prep.tokensBefore,
      previousSummary: prep.previousSummary ?? null,
      messagesToSummarize: prep.messagesToSummarize.map((m) => index.describe(m, branch, includeMessages)),
      turnPrefixMessages: prep.turnPrefixMessages.map((m) => index.describe(m, branch, includeMessages)),
      fileOps: fileOpsJson(prep.fileOps),
      fileLists: lists,
      formattedFileOperations: formatFileOperations(lists.readFiles, lists.modifiedFiles),
      serializedMessagesToSummarize: serializeConversation(convertToLlm(prep.messagesToSummarize)),
      serializedTurnPrefix: serializeConversation(convertToLlm(prep.turnPrefixMessages)),
      estimateTokensToSummarize: prep.messagesToSummarize.reduce((n, m) => n + estimateTokens(m), 0),
    },
  };
}

function defaultShouldCompactCases(tokens, contextWindow, settings) {
  const threshold = contextWindow - settings.reserveTokens;
  return [tokens, threshold, threshold + 1, 0].map((contextTokens) => ({ contextTokens, contextWindow, settings }));
}

function defaultCutCases(branch) {
  return [1, 2000, 20000, 1e9].map((keepRecentTokens) => ({ startIndex: 0, endIndex: branch.length, keepRecentTokens }));
}

// Without explicit pairs: from the leaf to every other tip of the tree (up to 10), and to a
// few of its own ancestors (a user message, an assistant message, the root).
function defaultBranchPairs(manager, entries, branch, leafId) {
  if (!leafId) return [];
  const hasChild = new Set(entries.map((e) => e.parentId).filter((p) => p));
  const tips = entries.filter((e) => !hasChild.has(e.id) && e.id !== leafId).slice(-10);
  const pairs = tips.map((e) => [leafId, e.id]);
  const back = (role) => [...branch].reverse().find((e) => e.type === "message" && e.message.role === role && e.id !== leafId);
  for (const e of [back("user"), back("assistant"), branch[0]]) {
    if (e && e.id !== leafId) pairs.push([leafId, e.id]);
  }
  return pairs;
}

function overflowReport(entries, contextWindow) {
  const ids = [];
  for (const e of entries) {
    if (e.type === "message" && e.message.role === "assistant" && isContextOverflow(e.message, contextWindow)) {
      ids.push(e.id);
    }
  }
  const cases = (options.overflowCases ?? []).map((c) => ({
    ...c,
    result: isContextOverflow(
      {
        role: "assistant",
        stopReason: c.stopReason ?? "error",
        errorMessage: c.errorMessage,
        usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, ...(c.usage ?? {}) },
      },
      c.contextWindow === undefined ? contextWindow : c.contextWindow,
    ),
  }));
  return { contextWindow, overflowAssistantIds: ids, cases };
}

function labelMap(manager, entries) {
  const labels = {};
  for (const e of entries) {
    const label = manager.getLabel(e.id);
    if (label !== undefined) labels[e.id] = label;
  }
  return labels;
}

// getTree() as flat, id-keyed nodes (iteratively: a 100k-entry chain is 100k levels deep).
function treeOf(manager) {
  const roots = manager.getTree();
  const nodes = {};
  const stack = [...roots].reverse();
  while (stack.length) {
    const node = stack.pop();
    const n = { children: node.children.map((c) => c.entry.id) };
    if (node.label !== undefined) n.label = node.label;
    if (node.labelTimestamp !== undefined) n.labelTimestamp = node.labelTimestamp;
    nodes[node.entry.id] = n;
    for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
  }
  return { rootIds: roots.map((r) => r.entry.id), nodes };
}

function fileOpsJson(ops) {
  return { read: [...ops.read], written: [...ops.written], edited: [...ops.edited] };
}

// Maps a message from one of pi's functions back to the entry it came from: message entries
// hand out their own message object; custom/branch/compaction messages are rebuilt from the
// entry, so they are matched on the entry's type, timestamp and content.
class EntryIndex {
  constructor(entries) {
    this.byMessage = new Map();
    this.synthetic = new Map();
    for (const e of entries) {
      if (e.type === "message") this.byMessage.set(e.message, e.id);
      else if (e.type === "custom_message" || e.type === "branch_summary" || e.type === "compaction") {
        const key = `${e.type}|${new Date(e.timestamp).getTime()}`;
        if (!this.synthetic.has(key)) this.synthetic.set(key, []);
        this.synthetic.get(key).push(e);
      }
    }
  }

  entryIdOf(m, scope) {
    const direct = this.byMessage.get(m);
    if (direct !== undefined) return direct;
    const type = { custom: "custom_message", branchSummary: "branch_summary", compactionSummary: "compaction" }[m.role];
    if (!type) return null;
    const candidates = (this.synthetic.get(`${type}|${m.timestamp}`) ?? []).filter((e) => {
      if (type === "custom_message") return e.customType === m.customType && e.content === m.content;
      if (type === "branch_summary") return e.fromId === m.fromId && e.summary === m.summary;
      return e.summary === m.summary && e.tokensBefore === m.tokensBefore;
    });
    if (candidates.length <= 1 || !scope) return candidates[0]?.id ?? null;
    const inScope = new Set(scope.map((e) => e.id));
    return candidates.find((e) => inScope.has(e.id))?.id ?? candidates[0].id;
  }

  describe(m, scope, full) {
    const d = { entryId: this.entryIdOf(m, scope), role: m.role };
    if (full || m.role === "custom" || m.role === "branchSummary" || m.role === "compactionSummary") d.message = m;
    return d;
  }
}

// The document can be far larger than V8's longest string (a 100k-entry session without
// compactions has the whole file in its context), so it is written piece by piece: arrays
// and the upper levels of objects element by element, everything else with JSON.stringify.
function writeJson(value, path, pretty) {
  const fd = path ? openSync(path, "w") : null;
  const chunks = [];
  let size = 0;
  const flush = () => {
    if (!chunks.length) return;
    const text = chunks.join("");
    chunks.length = 0;
    size = 0;
    if (fd !== null) writeSync(fd, text);
    else process.stdout.write(text);
  };
  const put = (text) => {
    chunks.push(text);
    size += text.length;
    if (size > 8_000_000) flush();
  };
  const walk = (v, depth, indent) => {
    const nl = pretty ? `\n${"  ".repeat(indent + 1)}` : "";
    const end = pretty ? `\n${"  ".repeat(indent)}` : "";
    if (Array.isArray(v) && v.length > 0) {
      put("[");
      v.forEach((x, i) => {
        put(i ? `,${nl}` : nl);
        walk(x === undefined ? null : x, depth + 1, indent + 1);
      });
      put(`${end}]`);
    } else if (v !== null && typeof v === "object" && !Array.isArray(v) && depth < 4) {
      const keys = Object.keys(v).filter((k) => v[k] !== undefined);
      if (!keys.length) return put("{}");
      put("{");
      keys.forEach((k, i) => {
        put(`${i ? "," : ""}${nl}${JSON.stringify(k)}:${pretty ? " " : ""}`);
        walk(v[k], depth + 1, indent + 1);
      });
      put(`${end}}`);
    } else {
      const text = pretty ? JSON.stringify(v, null, 2) : JSON.stringify(v);
      put(pretty ? text.replaceAll("\n", `\n${"  ".repeat(indent)}`) : text);
    }
  };
  walk(value, 0, 0);
  put("\n");
  flush();
  if (fd !== null) closeSync(fd);
}

// --- main (last, so that the classes above are initialised) ---------------------------

{
  if (piVersion !== EXPECTED_PI_VERSION && !options.allowOtherVersion) {
    fail(`installed pi is ${piVersion}, expected ${EXPECTED_PI_VERSION} (run npm ci in tests/parity)`);
  }

  const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");
  try {
    if (!statSync(sessionPath).isFile()) fail(`not a file: ${sessionPath}`);
  } catch {
    fail(`no such file: ${sessionPath}`);
  }
  const work = mkdtempSync(join(tmpdir(), "pi-reference-"));
  const copy = join(work, "session.jsonl");
  const timing = {};
  let doc;
  try {
    copyFileSync(sessionPath, copy);
    const hashBefore = sha256(copy);
    let t = performance.now();
    const manager = SessionManager.open(copy, join(work, "sessions"));
    timing.loadMs = Math.round(performance.now() - t);
    const hashAfter = sha256(copy);
    t = performance.now();
    doc = buildDocument(manager, hashBefore !== hashAfter ? readFileSync(copy, "utf8") : null);
    timing.computeMs = Math.round(performance.now() - t);
    doc.timing = timing;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  writeJson(doc, outPath, pretty);
}
