// The status bar text: usage, compaction progress and outcomes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Usage } from "@sessiond/client";
import {
  INITIAL_STATUS,
  formatTokens,
  reduceStatus,
  renderStatus,
  PAUSED_UNANNOUNCED,
  type StatusEvent,
  type StatusState,
} from "../src/core/status";

const usage = (tokens: number, window = 128000, shouldCompact = false, autoCompactionPaused = false): Usage => ({
  tokens,
  contextWindow: window,
  threshold: window - 16384,
  shouldCompact,
  percent: Math.round((10000 * tokens) / window) / 100,
  usageTokens: tokens,
  trailingTokens: 0,
  estimator: "tiktoken",
  ...(autoCompactionPaused ? { autoCompactionPaused } : {}),
});

const run = (...events: StatusEvent[]): StatusState => events.reduce(reduceStatus, INITIAL_STATUS);

describe("status", () => {
  it("formats token counts compactly", () => {
    assert.deepEqual([0, 999, 1000, 1234, 53_210, 128_000, 1_500_000].map(formatTokens), [
      "0",
      "999",
      "1k",
      "1.2k",
      "53.2k",
      "128k",
      "1.5M",
    ]);
  });

  it("shows disconnected, then usage", () => {
    assert.equal(renderStatus(INITIAL_STATUS).text, "$(debug-disconnect) sessiond");
    const view = renderStatus(
      run({ type: "connected" }, { type: "session", name: "refactor" }, { type: "usage", usage: usage(53_210) }),
    );
    assert.equal(view.text, "$(history) 42% · 53.2k/128k");
    assert.match(view.tooltip, /^refactor\nContext: 53,210 of 128,000 tokens \(41\.57%\)/);
    assert.equal(view.warning, false);
    assert.equal(
      renderStatus(run({ type: "connected" }, { type: "usage", usage: usage(4_000) })).text,
      "$(history) 3.1% · 4k/128k",
    );
  });

  it("warns past the threshold", () => {
    const view = renderStatus(run({ type: "connected" }, { type: "usage", usage: usage(120_000, 128_000, true) }));
    assert.equal(view.warning, true);
    assert.match(view.tooltip, /\(reached\)/);
  });

  it("follows a compaction from start to outcome", () => {
    const started = run(
      { type: "connected" },
      { type: "usage", usage: usage(120_000, 128_000, true) },
      { type: "compactionStarted", event: { sessionId: "s", reason: "threshold", willRetry: false } },
      { type: "progress", value: { kind: "begin", title: "Compacting the session" } },
      { type: "progress", value: { kind: "report", message: "gpt: 400 characters received", percentage: 40 } },
    );
    const during = renderStatus(started);
    assert.equal(during.text, "$(sync~spin) Compacting 40%…");
    assert.match(during.tooltip, /\(threshold\): gpt: 400 characters received/);
    const ended = reduceStatus(started, {
      type: "compactionEnded",
      event: {
        sessionId: "s",
        reason: "threshold",
        aborted: false,
        willRetry: false,
        tokensBefore: 120_000,
        tokensAfter: 20_000,
      },
    });
    const after = renderStatus(reduceStatus(ended, { type: "usage", usage: usage(20_000) }));
    assert.equal(after.text, "$(history) 16% · 20k/128k");
    assert.match(after.tooltip, /Compacted \(threshold\): 120k → 20k tokens/);
    assert.equal(after.warning, false);
  });

  it("keeps a failure visible as a warning, until the next compaction starts", () => {
    const failed = run(
      { type: "connected" },
      { type: "usage", usage: usage(1_000) },
      { type: "compactionStarted", event: { sessionId: "s", reason: "manual", willRetry: false } },
      {
        type: "compactionEnded",
        event: {
          sessionId: "s",
          reason: "manual",
          aborted: false,
          willRetry: false,
          errorMessage: "Summarization failed: 500",
        },
      },
    );
    assert.equal(renderStatus(failed).warning, true);
    assert.match(renderStatus(failed).tooltip, /Compaction failed: Summarization failed: 500/);
    const again = reduceStatus(failed, {
      type: "compactionStarted",
      event: { sessionId: "s", reason: "manual", willRetry: false },
    });
    assert.doesNotMatch(
      renderStatus(
        reduceStatus(again, {
          type: "compactionEnded",
          event: { sessionId: "s", reason: "manual", aborted: true, willRetry: false },
        }),
      ).tooltip,
      /failed/,
    );
    assert.equal(
      renderStatus(run({ type: "connected" }, { type: "progress", value: { kind: "report", message: "stray" } })).text,
      "$(history) sessiond",
      "progress outside a compaction is ignored",
    );
    assert.match(
      renderStatus(reduceStatus(failed, { type: "disconnected", reason: "sessiond exited with code 1" })).tooltip,
      /exited with code 1/,
    );
  });

  it("tells a summary written in the background apart: being written, ready, committed", () => {
    const base = run({ type: "connected" }, { type: "usage", usage: usage(80_000) });
    const writing = reduceStatus(base, {
      type: "compactionStarted",
      event: { sessionId: "s", reason: "background", willRetry: false, progressToken: "sessiond-background-1" },
    });
    const during = renderStatus(writing);
    assert.equal(during.text, "$(history) 63% · 80k/128k $(loading~spin)", "the usage stays, the agent goes on");
    assert.match(during.tooltip, /being written in the background; the next compaction will use it/);
    assert.equal(during.warning, false);
    const report = (token: string, message: string) =>
      ({ type: "backgroundProgress", token, value: { kind: "report", message } }) as const;
    const reported = reduceStatus(writing, report("sessiond-background-1", "gpt\u001b[2J: 400 characters received"));
    assert.match(
      renderStatus(reported).tooltip,
      /written in the background \(gpt\\u001b\[2J: 400 characters received\); the next/,
      "its progress, inert",
    );
    assert.equal(reduceStatus(writing, report("sessiond-client-3", "a request's own")), writing, "other tokens");

    const ready = reduceStatus(reported, {
      type: "compactionEnded",
      event: {
        sessionId: "s",
        reason: "background",
        aborted: false,
        willRetry: false,
        result: { summary: "## Goal", firstKeptEntryId: "k", tokensBefore: 80_000 },
      },
    });
    assert.equal(renderStatus(ready).text, "$(history) 63% · 80k/128k $(pass)");
    assert.match(renderStatus(ready).tooltip, /ready: the next compaction commits it without waiting/);
    assert.doesNotMatch(renderStatus(ready).tooltip, /Compacted/, "nothing was written yet");

    const committing = reduceStatus(ready, {
      type: "compactionStarted",
      event: { sessionId: "s", reason: "threshold", willRetry: false },
    });
    assert.equal(renderStatus(committing).text, "$(sync~spin) Compacting…");
    const committed = reduceStatus(committing, {
      type: "compactionEnded",
      event: {
        sessionId: "s",
        reason: "threshold",
        aborted: false,
        willRetry: false,
        entryId: "c1",
        tokensBefore: 115_000,
        tokensAfter: 30_000,
        prepared: true,
      },
    });
    const after = renderStatus(reduceStatus(committed, { type: "usage", usage: usage(30_000) }));
    assert.equal(after.text, "$(history) 23% · 30k/128k");
    assert.match(after.tooltip, /Compacted \(threshold, summary written in the background\): 115k → 30k tokens/);

    const failed = reduceStatus(writing, {
      type: "compactionEnded",
      event: {
        sessionId: "s",
        reason: "background",
        aborted: false,
        willRetry: false,
        errorMessage: "Background compaction failed: 500",
      },
    });
    assert.equal(renderStatus(failed).text, "$(history) 63% · 80k/128k");
    assert.match(renderStatus(failed).tooltip, /Background compaction failed: 500/);
    assert.equal(renderStatus(failed).warning, false, "the next compaction asks for a new summary");
    const dropped = reduceStatus(ready, { type: "undone" });
    assert.equal(renderStatus(dropped).text, "$(history) 63% · 80k/128k", "an undo drops the summary");
  });

  it("says when the no-loop rule paused automatic compaction, and what to do, until it is lifted", () => {
    const message =
      "Automatic compaction paused: the last compaction left 1,400 tokens in the context, over the threshold of 1,000, " +
      "so another one would free too little. Use a model with a larger context window, lower " +
      "compaction.keepRecentTokens, or compact manually (compaction/run).";
    const paused = run(
      { type: "connected" },
      { type: "usage", usage: usage(120_000, 128_000, true, true) },
      {
        type: "compactionEnded",
        event: {
          sessionId: "s",
          reason: "threshold",
          aborted: false,
          willRetry: false,
          skipped: true,
          paused: true,
          errorMessage: message,
        },
      },
    );
    const view = renderStatus(paused);
    assert.equal(view.text, "$(history) 94% · 120k/128k $(debug-pause)");
    assert.equal(view.warning, true);
    assert.ok(view.tooltip.split("\n").includes(message), "the daemon's words, whole");
    assert.doesNotMatch(view.tooltip, /Compaction failed/);
    assert.equal(
      renderStatus(reduceStatus(paused, { type: "usage", usage: usage(125_000, 128_000, true, true) })).text.endsWith(
        "$(debug-pause)",
      ),
      true,
    );
    const larger = reduceStatus(paused, { type: "usage", usage: usage(120_000, 1_000_000) });
    assert.doesNotMatch(renderStatus(larger).text, /debug-pause/, "a larger window lifts it");
    const late = run({ type: "connected" }, { type: "usage", usage: usage(120_000, 128_000, true, true) });
    assert.equal(late.paused, PAUSED_UNANNOUNCED, "a window that missed the announcement learns it from the usage");
    const manual = reduceStatus(paused, {
      type: "compactionEnded",
      event: {
        sessionId: "s",
        reason: "manual",
        aborted: false,
        willRetry: false,
        entryId: "c2",
        tokensBefore: 1,
        tokensAfter: 1,
      },
    });
    assert.equal(manual.paused, undefined, "a compaction written lifts it");
    assert.equal(reduceStatus(paused, { type: "undone" }).paused, undefined);
    const hostile = renderStatus(
      reduceStatus(paused, {
        type: "compactionEnded",
        event: {
          sessionId: "s",
          reason: "threshold",
          aborted: false,
          willRetry: false,
          skipped: true,
          paused: true,
          errorMessage: "a\u001b[2Jb\nc",
        },
      }),
    );
    assert.ok(hostile.tooltip.includes("a\\u001b[2Jb\\nc"), "shown inert");
  });
});
