// Compaction: the threshold check at the end of a turn, hooks, llm/complete, progress, cancellation.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CancellationTokenSource,
  isSessiondError,
  type BeforeCompactHookParams,
  type BeforeCompactHookResult,
  type CancellationToken,
  type CompactHookParams,
  type CompactingHookResult,
  type LlmCompleteParams,
  type WorkDoneProgress,
} from "@sessiond/client";
import { SMALL_CONTEXT_WINDOW, turn, waitFor } from "@sessiond/client/testing";
import { delay, record, suiteDaemon } from "./helpers";

/** What the hooks of the test client do; each test sets what it needs. */
interface Behaviour {
  beforeCompact?: (params: BeforeCompactHookParams) => BeforeCompactHookResult | undefined;
  compacting?: CompactingHookResult;
  llm?: (params: LlmCompleteParams, token: CancellationToken) => Promise<string>;
}

describe("compaction", () => {
  let behaviour: Behaviour = {};
  const compacted: CompactHookParams[] = [];
  const llmRequests: LlmCompleteParams[] = [];
  const daemon = suiteDaemon({}, (c) => {
    c.onBeforeCompact((params) => behaviour.beforeCompact?.(params));
    c.onCompacting(() => behaviour.compacting);
    c.onSessionCompact((params) => compacted.push(params));
    c.onLlmComplete((params, token) => {
      llmRequests.push(params);
      if (!behaviour.llm) throw new Error("no model in this test");
      return behaviour.llm(params, token);
    });
  });
  const { client } = daemon;

  /** A session whose last assistant message reports `lastTokens` of a SMALL_CONTEXT_WINDOW context. */
  async function filledSession(turns: number, lastTokens: number): Promise<string> {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    for (let i = 0; i < turns; i++) {
      await client.append({ sessionId, entries: turn(i, i === turns - 1 ? lastTokens : 200 * (i + 1)) });
    }
    return sessionId;
  }

  /** The client summarizer for one session, so other tests keep the offline one. */
  async function useClientModel(sessionId: string): Promise<void> {
    await client.updateSettings({
      sessionId,
      settings: { summarizer: { candidates: [{ kind: "client" }], extractiveFallback: false } },
    });
  }

  it("compacts at the threshold when a turn ends, and tells the client", async () => {
    behaviour = {};
    const sessionId = await filledSession(6, 2000);
    const started = record(client.onCompactionStarted);
    const ended = record(client.onCompactionEnded);
    const changed = record(client.onSessionChanged);
    const progress: WorkDoneProgress[] = [];

    const quiet = await client.turnEnded({ sessionId, contextWindow: 10 * SMALL_CONTEXT_WINDOW });
    assert.equal(quiet.action, "none", "below the threshold of a big window nothing happens");
    assert.equal(quiet.compaction ?? null, null);

    const result = await client.turnEnded(
      { sessionId, contextWindow: SMALL_CONTEXT_WINDOW },
      { onProgress: (value) => progress.push(value) },
    );
    assert.equal(result.action, "continue");
    assert.match(result.prompt ?? "", /compacted/);
    assert.ok(result.compaction);
    assert.equal(result.compaction.reason, "threshold");
    assert.ok(result.compaction.tokensAfter < result.compaction.tokensBefore);
    assert.equal(result.usage?.shouldCompact, false);

    assert.deepEqual(
      started.values.map((e) => [e.sessionId, e.reason, e.willRetry]),
      [[sessionId, "threshold", false]],
    );
    assert.equal(ended.values.length, 1);
    assert.equal(ended.values[0]!.entryId, result.compaction.entryId);
    assert.equal(ended.values[0]!.aborted, false);
    assert.ok(changed.values.some((e) => e.reason === "compaction" && e.leafId === result.compaction!.entryId));
    assert.deepEqual(
      progress.map((p) => p.kind).filter((k, i, all) => all.indexOf(k) === i),
      ["begin", "report", "end"],
    );
    assert.equal(
      compacted.at(-1)?.compactionEntry && (compacted.at(-1)!.compactionEntry as { id: string }).id,
      result.compaction.entryId,
    );
    [started, ended, changed].forEach((r) => r.dispose());

    const context = await client.buildContext({ sessionId });
    assert.equal(context.messages[0]!.role, "compactionSummary");
    assert.match(String(context.messages[0]!.summary), /extractive/i, "the offline summarizer wrote it");
    const tree = await client.tree({ sessionId });
    assert.equal(tree.nodes.filter((n) => n.type === "compaction").length, 1);
  });

  it("lets session_before_compact cancel a compaction", async () => {
    const sessionId = await filledSession(6, 2000);
    const { leafId } = await client.tree({ sessionId });
    let asked: BeforeCompactHookParams | undefined;
    behaviour = {
      beforeCompact: (params) => {
        asked = params;
        return { cancel: true };
      },
    };
    const error = await client
      .runCompaction({ sessionId, customInstructions: "keep the API notes" })
      .catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "cancelled"), String(error));
    assert.equal(asked?.sessionId, sessionId);
    assert.equal(asked?.customInstructions, "keep the API notes");
    assert.ok(asked && asked.preparation.summarizeEntryIds.length > 0);
    assert.ok(Array.isArray(asked?.preparation.messagesToSummarize), "hooks see the messages");
    const tree = await client.tree({ sessionId });
    assert.equal(tree.leafId, leafId, "a cancelled compaction writes nothing");
    assert.equal(tree.nodes.filter((n) => n.type === "compaction").length, 0);
  });

  it("lets session_before_compact supply the summary", async () => {
    const sessionId = await filledSession(6, 2000);
    behaviour = {
      beforeCompact: ({ preparation }) => ({
        compaction: {
          summary: "Summary written by the hook.",
          firstKeptEntryId: preparation.firstKeptEntryId,
          tokensBefore: preparation.tokensBefore,
          details: { by: "test" },
        },
      }),
    };
    const before = compacted.length;
    const result = await client.runCompaction({ sessionId });
    assert.equal(result.fromExtension, true);
    assert.equal(result.entry.type, "compaction");
    assert.equal(result.entry.summary, "Summary written by the hook.");
    assert.deepEqual(result.entry.details, { by: "test" });
    await delay(50);
    assert.equal(compacted.length, before + 1, "session_compact told");
    assert.equal(compacted.at(-1)!.fromExtension, true);
  });

  it("summarizes through llm/complete with the session.compacting context", async () => {
    const sessionId = await filledSession(6, 2000);
    await useClientModel(sessionId);
    behaviour = {
      compacting: { context: ["Remember the blue widget."] },
      llm: async () => "## Goal\nSummary from the client's model.",
    };
    llmRequests.length = 0;
    const result = await client.runCompaction({ sessionId });
    assert.ok(llmRequests.length >= 1);
    assert.ok(
      llmRequests.some((r) => r.prompt.includes("Remember the blue widget.")),
      "the hook's context reached the prompt",
    );
    assert.ok(llmRequests[0]!.systemPrompt.length > 0);
    assert.ok(llmRequests[0]!.maxTokens > 0);
    assert.match(String(result.entry.summary), /Summary from the client's model\./);
    assert.equal(result.fromExtension, false);
  });

  it("cancels a running compaction with a CancellationToken, and the daemon cancels llm/complete", async () => {
    const sessionId = await filledSession(6, 2000);
    await useClientModel(sessionId);
    const leafBefore = (await client.tree({ sessionId })).leafId;
    let llmCancelled = false;
    behaviour = {
      llm: (_params, token) =>
        new Promise((resolve) => {
          token.onCancellationRequested(() => {
            llmCancelled = true;
            resolve("too late");
          });
        }),
    };
    llmRequests.length = 0;
    const source = new CancellationTokenSource();
    const running = client.runCompaction({ sessionId }, { token: source.token });
    await waitFor(() => llmRequests.length > 0, "llm/complete");
    const started = Date.now();
    source.cancel();
    const error = await running.catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "cancelled"), String(error));
    assert.equal(error.code, -32800);
    assert.ok(Date.now() - started < 2000, "cancellation is prompt");
    await delay(50);
    assert.equal(llmCancelled, true, "the daemon passed the cancellation on to llm/complete");
    assert.equal((await client.tree({ sessionId })).leafId, leafBefore, "nothing was written");
  });

  it("cancels with an AbortSignal, and compaction/abort stops a compaction from elsewhere", async () => {
    const sessionId = await filledSession(6, 2000);
    await useClientModel(sessionId);
    behaviour = {
      llm: (_params, token) => new Promise((resolve) => token.onCancellationRequested(() => resolve("late"))),
    };
    const aborted = new AbortController();
    aborted.abort();
    const early = await client.runCompaction({ sessionId }, { signal: aborted.signal }).catch((e: unknown) => e);
    assert.ok(isSessiondError(early, "cancelled"), `an aborted signal cancels at once: ${String(early)}`);

    // Cancelled in the same tick as sent: the request and $/cancelRequest reach the daemon together.
    const source = new CancellationTokenSource();
    const started = Date.now();
    const sent = client.runCompaction({ sessionId }, { token: source.token });
    source.cancel();
    const immediate = await sent.catch((e: unknown) => e);
    assert.ok(isSessiondError(immediate, "cancelled"), String(immediate));
    assert.ok(Date.now() - started < 5000);

    llmRequests.length = 0;
    const running = client.runCompaction({ sessionId });
    await waitFor(() => llmRequests.length > 0, "llm/complete");
    assert.deepEqual(await client.abortCompaction({ sessionId }), { aborted: true });
    const error = await running.catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "cancelled"), String(error));
    assert.deepEqual(await client.abortCompaction({ sessionId }), { aborted: false }, "nothing left to abort");
  });

  it("takes a compaction back by appending, and names what its summary stands for", async () => {
    behaviour = {};
    const sessionId = await filledSession(6, 2000);
    const done = await client.turnEnded({ sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.ok(done.compaction);
    const covered = await client.coveredByCompaction({ sessionId, entryId: done.compaction.entryId });
    assert.ok(covered.entryIds.length > 0 && covered.total === covered.entryIds.length);
    const read = await client.entries({ sessionId, ids: covered.entryIds });
    assert.deepEqual(read.entries.map((e) => e.id), covered.entryIds);

    const undone = await client.undoCompaction({ sessionId, entryId: done.compaction.entryId });
    assert.equal(undone.undoneEntryId, done.compaction.entryId);
    const context = await client.buildContext({ sessionId });
    assert.ok(!context.messages.some((m) => m.role === "compactionSummary"), "the summary is gone");
    const again = await client.undoCompaction({ sessionId }).catch((e: unknown) => e);
    assert.ok(isSessiondError(again, "nothingToUndo"), String(again));
  });
});
