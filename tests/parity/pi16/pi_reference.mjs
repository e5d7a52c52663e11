#!/usr/bin/env node
// Runs pi 1.6.0's own functions on a session file and prints one JSON document of what they
// return, so that sessiond can be compared with today's pi (tests/parity/test_parity_pi16.py).
//
//   node pi_reference.mjs SESSION.jsonl [--options-json JSON] [--out FILE]
//
// Options (all optional): {"leaves": ids | "all" (default "all": every entry),
// "keeps": [keepRecentTokens...] (default [150, 400, 1200]), "compactionLeaves": ids | "all"
// (default "all"), "branchPairs": [[oldLeafId, targetId]...] (default: every tip to every
// other tip and to every 9th entry), "branchTokenBudgets": [0, 600]}.
//
// The input file is never modified: pi may append a newline to a file whose last line has
// none, so pi reads a copy. Functions come from dist/core/session-manager.js,
// dist/core/compaction/index.js and dist/core/messages.js, loaded directly: the package
// index needs Node 22, these modules load on Node 20.

import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const packageDir = join(here, "node_modules", "@earendil-works", "pi-coding-agent");
const core = join(packageDir, "dist", "core");
const { SessionManager, buildSessionProjection } = await import(join(core, "session-manager.js"));
const compaction = await import(join(core, "compaction", "index.js"));
const { convertToLlm } = await import(join(core, "messages.js"));
const { getCurrentSystemMessage } = await import(
  join(here, "node_modules", "@earendil-works", "pi-ai", "dist", "index.js")
);
const {
  collectEntriesForBranchSummary,
  computeFileLists,
  estimateContextTokens,
  estimateProjectedContextTokens,
  estimateTokens,
  prepareBranchEntries,
  prepareCompaction,
  serializeConversation,
} = compaction;

const args = process.argv.slice(2);
const input = args[0];
const flag = (name) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
if (!input) {
  console.error("usage: node pi_reference.mjs SESSION.jsonl [--options-json JSON] [--out FILE]");
  process.exit(2);
}
const options = JSON.parse(flag("options-json") ?? "{}");
const keeps = options.keeps ?? [150, 400, 1200];
const budgets = options.branchTokenBudgets ?? [0, 600];

const work = mkdtempSync(join(tmpdir(), "pi16-reference-"));
try {
  const copy = join(work, "session.jsonl");
  copyFileSync(input, copy);
  const manager = SessionManager.open(copy, work);
  const entries = manager.getEntries();
  const byId = new Map(entries.map((e) => [e.id, e]));
  const parents = new Set(entries.map((e) => e.parentId));
  const tips = entries.filter((e) => !parents.has(e.id)).map((e) => e.id);
  const leaves = options.leaves === undefined || options.leaves === "all" ? entries.map((e) => e.id) : options.leaves;
  const compactionLeaves =
    options.compactionLeaves === undefined || options.compactionLeaves === "all"
      ? entries.map((e) => e.id)
      : options.compactionLeaves;

  const guarded = (work) => {
    try {
      return work();
    } catch (error) {
      return { error: String(error?.message ?? error) };
    }
  };

  const contexts = leaves.map((leafId) =>
    guarded(() => {
      const projection = buildSessionProjection(entries, leafId, byId);
      const branch = manager.getBranch(leafId);
      const messages = [];
      for (const projected of projection.entries) {
        for (const message of projected.messages) {
          messages.push({ entryId: projected.sourceEntry.id, message, estimateTokens: estimateTokens(message) });
        }
      }
      return {
        leafId,
        thinkingLevel: projection.thinkingLevel,
        model: projection.model,
        messages,
        estimateContextTokens: estimateContextTokens(projection.messages),
        projectedContextTokens: estimateProjectedContextTokens(projection, branch),
        llm: convertToLlm(projection.messages),
        // what pi's appendCompaction would store as the systemMessage checkpoint here
        systemCheckpoint: getCurrentSystemMessage(projection.messages) ?? null,
      };
    }),
  );

  const describeLists = (messages) => serializeConversation(convertToLlm(messages));
  const prepared = [];
  for (const leafId of compactionLeaves) {
    for (const keep of keeps) {
      prepared.push(
        guarded(() => {
          const path = manager.getBranch(leafId);
          const result = prepareCompaction(path, { enabled: true, reserveTokens: 16384, keepRecentTokens: keep });
          if (!result) return { leafId, keep, result: null };
          return {
            leafId,
            keep,
            result: {
              firstKeptEntryId: result.firstKeptEntryId,
              isSplitTurn: result.isSplitTurn,
              tokensBefore: result.tokensBefore,
              previousSummary: result.previousSummary ?? null,
              messagesToSummarize: result.messagesToSummarize,
              turnPrefixMessages: result.turnPrefixMessages,
              fileLists: computeFileLists(result.fileOps),
              serializedMessagesToSummarize: describeLists(result.messagesToSummarize),
              serializedTurnPrefix: describeLists(result.turnPrefixMessages),
            },
          };
        }),
      );
    }
  }

  const pairs = options.branchPairs ?? [
    ...tips.flatMap((from) => tips.filter((to) => to !== from).map((to) => [from, to])),
    ...tips.flatMap((from) => entries.filter((_, i) => i % 9 === 0).map((e) => [from, e.id])),
  ];
  const branchSummaries = pairs.map(([oldLeafId, targetId]) =>
    guarded(() => {
      const collected = collectEntriesForBranchSummary(manager, oldLeafId, targetId);
      return {
        oldLeafId,
        targetId,
        commonAncestorId: collected.commonAncestorId,
        entryIds: collected.entries.map((e) => e.id),
        prepared: budgets.map((tokenBudget) =>
          guarded(() => {
            const p = prepareBranchEntries(collected.entries, tokenBudget);
            return {
              tokenBudget,
              messages: p.messages,
              totalTokens: p.totalTokens,
              fileLists: computeFileLists(p.fileOps),
              serialized: describeLists(p.messages),
            };
          }),
        ),
      };
    }),
  );

  const tree = { rootIds: [], nodes: {} };
  const walk = (nodes, into) => {
    for (const node of nodes) {
      into.push(node.entry.id);
      tree.nodes[node.entry.id] = { children: node.children.map((c) => c.entry.id), label: node.label ?? null };
      walk(node.children, []);
    }
  };
  walk(manager.getTree(), tree.rootIds);

  const document = {
    pi: { package: "@earendil-works/pi-coding-agent", version: JSON.parse(readFileSync(join(packageDir, "package.json"))).version },
    entries: entries.map((e) => ({ id: e.id, parentId: e.parentId, type: e.type })),
    leafId: manager.getLeafId(),
    tips,
    tree,
    contexts,
    prepareCompaction: prepared,
    branchSummaries,
  };
  const text = JSON.stringify(document);
  const outFile = flag("out");
  if (outFile) writeFileSync(outFile, text);
  else process.stdout.write(text);
} finally {
  rmSync(work, { recursive: true, force: true });
}
