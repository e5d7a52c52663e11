#!/usr/bin/env node
// Experiments on pi 0.73.1 behind the "pi 0.73.1 against older pi and oh-my-pi" list in
// README.md.
// Each experiment prints {name, ...observations}; run: node pi_experiments.mjs [--pretty]
// Nothing here is sessiond code: it only calls pi's installed package and records what it does.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const PI_DIST = new URL("./node_modules/@mariozechner/pi-coding-agent/dist/", import.meta.url);
const sm = await import(new URL("core/session-manager.js", PI_DIST));
const comp = await import(new URL("core/compaction/index.js", PI_DIST));
const msgs = await import(new URL("core/messages.js", PI_DIST));
const piAi = await import("@mariozechner/pi-ai");

const { SessionManager, buildSessionContext } = sm;
const { convertToLlm } = msgs;
const work = mkdtempSync(join(tmpdir(), "pi-experiments-"));
const results = [];
const record = (name, observations) => results.push({ name, ...observations });

const usage = (total = 0) => ({
  input: 10,
  output: 20,
  cacheRead: total,
  cacheWrite: 0,
  totalTokens: total + 30,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});
const user = (text, ts = 1) => ({ role: "user", content: [{ type: "text", text }], timestamp: ts });
const assistant = (content, extra = {}) => ({
  role: "assistant",
  content,
  api: "anthropic-messages",
  provider: "anthropic",
  model: "claude-sonnet-4-5",
  usage: usage(1000),
  stopReason: "stop",
  timestamp: 2,
  ...extra,
});
const toolCall = (id, name, args) => ({ type: "toolCall", id, name, arguments: args });
const toolResult = (id, name, text) => ({
  role: "toolResult",
  toolCallId: id,
  toolName: name,
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 3,
});

try {
  // 1. Session ids: uuid v7 (older pi used randomUUID, v4).
  {
    const ids = [0, 1, 2].map(() => SessionManager.inMemory("/tmp").getSessionId());
    record("sessionIdVersion", { ids, versionNibbles: ids.map((id) => id[14]) });
  }

  // 2. What pi writes for every entry type: key order, omitted undefined keys.
  {
    const dir = join(work, "keys");
    const m = SessionManager.create("/tmp/project", dir);
    const u = m.appendMessage(user("hello"));
    m.appendMessage(assistant([{ type: "text", text: "hi" }]));
    m.appendThinkingLevelChange("high");
    m.appendModelChange("openai", "gpt-5.1-codex");
    m.appendCustomEntry("ext-state", { a: 1 });
    m.appendCustomEntry("ext-state-no-data");
    m.appendCustomMessageEntry("ext-msg", "injected", false);
    m.appendCustomMessageEntry("ext-msg", [{ type: "text", text: "shown" }], true, { k: 1 });
    m.appendLabelChange(u, "bookmark");
    m.appendLabelChange(u, undefined);
    m.appendLabelChange(u, "");
    m.appendSessionInfo("  my session  ");
    m.appendCompaction("sum", u, 123, { readFiles: [], modifiedFiles: [] }, false);
    m.appendCompaction("sum2", u, 124);
    m.branchWithSummary(u, "branch sum", { readFiles: ["a"], modifiedFiles: [] }, false);
    m.branchWithSummary(null, "root sum");
    const lines = readFileSync(m.getSessionFile(), "utf8").trimEnd().split("\n");
    record("writtenKeyOrder", {
      file: m.getSessionFile().split("/").pop(),
      lines: lines.map((l) => {
        const o = JSON.parse(l);
        return { type: o.type, keys: Object.keys(o), line: o.type === "message" ? undefined : l };
      }),
    });
  }

  // 3. Session name: the last session_info in file order wins even when its name is empty.
  {
    const m = SessionManager.inMemory("/tmp");
    m.appendMessage(user("x"));
    m.appendSessionInfo("first");
    const named = m.getSessionName();
    m.appendSessionInfo("   ");
    record("sessionNameClearedByEmpty", { afterFirst: named, afterEmpty: m.getSessionName() ?? null });
  }

  // 4. isContextOverflow: patterns, exclusions and the length-stop case.
  {
    const cases = [
      ["error", '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}'],
      ["error", "prompt too long; exceeded max context length by 1200 tokens"],
      ["error", "Throttling error: Too many tokens, please wait before trying again."],
      ["error", "429 rate limit reached: too many tokens per minute"],
      ["error", "Too many requests: too many tokens"],
      ["error", "too many tokens in prompt"],
      ["error", "429 status code (no body)"],
      ["error", "400 status code (no body)"],
      ["error", "prompt is too long: 213462 tokens > 200000 maximum"],
    ].map(([stopReason, errorMessage]) => ({
      stopReason,
      errorMessage,
      result: piAi.isContextOverflow({ role: "assistant", stopReason, errorMessage, usage: usage(0) }, 200000),
    }));
    const lengthStop = (input, output) =>
      piAi.isContextOverflow(
        { role: "assistant", stopReason: "length", usage: { ...usage(0), input, cacheRead: 0, output } },
        200000,
      );
    const silent = (stopReason) =>
      piAi.isContextOverflow({ role: "assistant", stopReason, usage: { ...usage(0), input: 150000, cacheRead: 60000 } }, 200000);
    record("isContextOverflow", {
      cases,
      lengthStopFullWindowZeroOutput: lengthStop(198000, 0),
      lengthStopBelow99Percent: lengthStop(197000, 0),
      lengthStopWithOutput: lengthStop(199000, 5),
      silentOverflowStop: silent("stop"),
      silentOverflowToolUse: silent("toolUse"),
    });
  }

  // 5. serializeConversation counts UTF-16 units and can split a surrogate pair.
  {
    const text = `${"x".repeat(1999)}🍕 and more`;
    const s = comp.serializeConversation([toolResult("t", "read", text)]);
    const cut = s.slice("[Tool result]: ".length, "[Tool result]: ".length + 2000);
    record("serializeSplitsSurrogates", {
      inputLengthUtf16: text.length,
      lastCodeUnitKept: cut.charCodeAt(1999).toString(16),
      tail: s.slice(-45),
    });
  }

  // 6. Loading: a UTF-8 BOM, CRLF line ends, blank and broken lines.
  {
    const header = { type: "session", version: 3, id: "s1", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/p" };
    const e1 = { type: "message", id: "aaaaaaaa", parentId: null, timestamp: "2026-01-01T00:00:01.000Z", message: user("a") };
    const e2 = { type: "message", id: "bbbbbbbb", parentId: "aaaaaaaa", timestamp: "2026-01-01T00:00:02.000Z", message: assistant([]) };
    const variants = {
      crlf: `${[header, e1, e2].map((x) => JSON.stringify(x)).join("\r\n")}\r\n`,
      blankAndBroken: `${JSON.stringify(header)}\n\n{broken\n${JSON.stringify(e1)}\n   \n${JSON.stringify(e2)}\n`,
      bom: `\ufeff${[header, e1, e2].map((x) => JSON.stringify(x)).join("\n")}\n`,
      leadingBlankLine: `\n${[header, e1, e2].map((x) => JSON.stringify(x)).join("\n")}\n`,
      noTrailingNewlineTornLast: `${[header, e1].map((x) => JSON.stringify(x)).join("\n")}\n${JSON.stringify(e2).slice(0, 40)}`,
    };
    const out = {};
    for (const [name, content] of Object.entries(variants)) {
      const p = join(work, `load-${name}.jsonl`);
      writeFileSync(p, content);
      const m = SessionManager.open(p, join(work, "load-dir"));
      const after = readFileSync(p, "utf8");
      out[name] = {
        entryIds: m.getEntries().map((e) => e.id),
        leafId: m.getLeafId(),
        sessionId: m.getSessionId(),
        fileRewritten: after !== content,
        fileAfter: after !== content ? after.slice(0, 160) : undefined,
      };
    }
    record("loading", out);
  }

  // 7. v1 migration: fresh ids, parent chain, firstKeptEntryIndex (raw file index, header = 0).
  {
    const p = join(work, "v1.jsonl");
    const v1 = [
      { type: "session", id: "old", timestamp: "2025-01-01T00:00:00.000Z", cwd: "/p", provider: "anthropic" },
      { type: "message", timestamp: "2025-01-01T00:00:01.000Z", message: user("one") },
      { type: "message", timestamp: "2025-01-01T00:00:02.000Z", message: { role: "hookMessage", customType: "x", content: "hook", display: true, timestamp: 5 } },
      { type: "compaction", timestamp: "2025-01-01T00:00:03.000Z", summary: "s", firstKeptEntryIndex: 2, tokensBefore: 9 },
    ];
    writeFileSync(p, `${v1.map((x) => JSON.stringify(x)).join("\n")}\n`);
    const m = SessionManager.open(p, join(work, "v1-dir"));
    const es = m.getEntries();
    record("migrationV1", {
      header: m.getHeader(),
      entries: es.map((e) => ({ id: e.id, parentId: e.parentId, type: e.type, role: e.message?.role, firstKeptEntryId: e.firstKeptEntryId, hasIndex: "firstKeptEntryIndex" in e })),
      fileRewritten: readFileSync(p, "utf8").includes('"version":3'),
    });
  }

  // 8. compact() and generateBranchSummary() against a fake model: what pi sends.
  {
    const faux = piAi.registerFauxProvider({
      provider: "faux",
      models: [
        { id: "faux-reasoning", reasoning: true, contextWindow: 50000 },
        { id: "faux-plain", reasoning: false },
      ],
    });
    const requests = [];
    const respond = (context, options) => {
      const text = context.messages[0].content.map((b) => b.text).join("");
      requests.push({
        maxTokens: options?.maxTokens,
        reasoning: options?.reasoning ?? null,
        systemPromptStart: context.systemPrompt?.slice(0, 60),
        userTextStart: text.slice(0, 120),
        userTextEnd: text.slice(-60),
        hasPreviousSummaryBlock: text.includes("<previous-summary>"),
        emptyConversation: text.startsWith("<conversation>\n\n</conversation>"),
      });
      return piAi.fauxAssistantMessage(`SUMMARY-${requests.length}`);
    };
    const reasoningModel = faux.getModel("faux-reasoning");
    const plainModel = faux.getModel("faux-plain");
    const entries = [];
    let prev = null;
    const add = (e) => {
      const id = `e${String(entries.length).padStart(7, "0")}`;
      entries.push({ id, parentId: prev, timestamp: new Date(1_700_000_000_000 + entries.length * 1000).toISOString(), ...e });
      prev = id;
      return id;
    };
    add({ type: "message", message: user("fix the bug in a.py") });
    add({ type: "message", message: assistant([toolCall("c1", "read", { path: "a.py" })], { stopReason: "toolUse" }) });
    add({ type: "message", message: toolResult("c1", "read", "x".repeat(4000)) });
    add({ type: "message", message: assistant([toolCall("c2", "edit", { path: "a.py", edits: [] })], { stopReason: "toolUse" }) });
    add({ type: "message", message: toolResult("c2", "edit", "ok") });
    add({ type: "message", message: assistant([{ type: "text", text: "done" }]) });
    const settings = { enabled: true, reserveTokens: 16384, keepRecentTokens: 1 };

    const runs = {};
    for (const [name, model, level, keep] of [
      ["reasoningModelThinkingMedium", reasoningModel, "medium", 1],
      ["reasoningModelThinkingOff", reasoningModel, "off", 1],
      ["plainModelThinkingHigh", plainModel, "high", 1],
      ["splitTurnNoHistory", reasoningModel, "low", 1],
    ]) {
      requests.length = 0;
      faux.setResponses([respond, respond]);
      let path = entries;
      if (name === "splitTurnNoHistory") {
        path = [...entries];
        const cId = path[1].id;
        path.push({ type: "compaction", id: "cmp00001", parentId: path[path.length - 1].id, timestamp: new Date(1_800_000_000_000).toISOString(), summary: "PREVIOUS", firstKeptEntryId: cId, tokensBefore: 10 });
        path.push({ type: "message", id: "u2", parentId: "cmp00001", timestamp: new Date(1_800_000_001_000).toISOString(), message: user("continue") });
        path.push({ type: "message", id: "a2", parentId: "u2", timestamp: new Date(1_800_000_002_000).toISOString(), message: assistant([{ type: "text", text: "ok" }]) });
      }
      const prep = comp.prepareCompaction(path, { ...settings, keepRecentTokens: keep });
      const result = await comp.compact(prep, model, "key", undefined, undefined, undefined, level);
      runs[name] = {
        preparation: {
          firstKeptEntryId: prep.firstKeptEntryId,
          isSplitTurn: prep.isSplitTurn,
          messagesToSummarize: prep.messagesToSummarize.length,
          turnPrefixMessages: prep.turnPrefixMessages.length,
          previousSummary: prep.previousSummary ?? null,
        },
        requests: [...requests],
        summary: result.summary,
        details: result.details,
      };
    }
    // Nothing to summarize (everything fits): pi still calls the model on an empty conversation.
    requests.length = 0;
    faux.setResponses([respond]);
    const fits = comp.prepareCompaction(entries.slice(0, 1), { ...settings, keepRecentTokens: 20000 });
    const fitsResult = await comp.compact(fits, plainModel, "key");
    runs.nothingToSummarize = { messagesToSummarize: fits.messagesToSummarize.length, requests: [...requests], summary: fitsResult.summary };

    const m = SessionManager.inMemory("/tmp");
    for (const e of entries) if (e.type === "message") m.appendMessage(e.message);
    const leaf = m.getLeafId();
    const first = m.getEntries()[0].id;
    requests.length = 0;
    faux.setResponses([respond]);
    const collected = comp.collectEntriesForBranchSummary(m, leaf, first);
    const branch = await comp.generateBranchSummary(collected.entries, {
      model: reasoningModel,
      apiKey: "key",
      signal: new AbortController().signal,
    });
    runs.branchSummary = { requests: [...requests], result: branch };
    requests.length = 0;
    faux.setResponses([respond]);
    const replaced = await comp.generateBranchSummary(collected.entries, {
      model: reasoningModel,
      apiKey: "key",
      signal: new AbortController().signal,
      customInstructions: "ONLY THIS",
      replaceInstructions: true,
    });
    runs.branchSummaryReplaceInstructions = { requests: [...requests], summaryStart: replaced.summary.slice(0, 40) };
    const empty = await comp.generateBranchSummary([], { model: reasoningModel, apiKey: "key", signal: new AbortController().signal });
    runs.branchSummaryEmpty = empty;
    faux.unregister();
    record("summarizerRequests", runs);
  }

  // 9. buildSessionContext details: model from assistant vs model_change, labels ignored.
  {
    const m = SessionManager.inMemory("/tmp");
    m.appendModelChange("openai", "gpt-5");
    m.appendMessage(user("q"));
    m.appendMessage(assistant([{ type: "text", text: "a" }]));
    m.appendThinkingLevelChange("high");
    const ctx = m.buildSessionContext();
    record("contextModel", { model: ctx.model, thinkingLevel: ctx.thinkingLevel, messages: ctx.messages.length });
  }

  // 10. getTree: label timestamps, children order by timestamp.
  {
    const m = SessionManager.inMemory("/tmp");
    const a = m.appendMessage(user("root"));
    m.appendLabelChange(a, "L");
    const node = m.getTree()[0];
    record("treeNode", { label: node.label, labelTimestamp: typeof node.labelTimestamp, keys: Object.keys(node) });
  }

  // 11. convertToLlm of the synthetic roles (exact text pi sends).
  {
    const llm = convertToLlm([
      { role: "branchSummary", summary: "B", fromId: "x", timestamp: 1 },
      { role: "compactionSummary", summary: "C", tokensBefore: 1, timestamp: 1 },
      { role: "bashExecution", command: "ls", output: "", exitCode: 2, cancelled: false, truncated: true, fullOutputPath: "/tmp/o", timestamp: 1 },
      { role: "bashExecution", command: "ls", output: "x", exitCode: 0, cancelled: false, truncated: false, timestamp: 1, excludeFromContext: true },
      { role: "custom", customType: "t", content: "hello", display: false, timestamp: 1 },
    ]);
    record("convertToLlm", { texts: llm.map((x) => x.content[0].text), count: llm.length });
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const pretty = process.argv.includes("--pretty");
process.stdout.write(`${JSON.stringify(results, null, pretty ? 2 : 0)}\n`);
