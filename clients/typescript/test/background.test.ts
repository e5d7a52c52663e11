// A summary written in the background, shown as work-done progress on a token the client accepted.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CompactionEndedNotification, CompactionStartedNotification, ProgressParams } from "@sessiond/client";
import { SMALL_CONTEXT_WINDOW, nextEvent, turn, waitFor } from "@sessiond/client/testing";
import { record, suiteDaemon } from "./helpers";

describe("background compaction", () => {
  const daemon = suiteDaemon({ backgroundProgress: true });
  const { client } = daemon;

  it("reports the background summary through onProgress on the token compaction/started names", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const started = record<CompactionStartedNotification>(client.onCompactionStarted);
    const shown = record<ProgressParams>(client.onProgress);
    const progress = shown.values;
    try {
      const ended = nextEvent(client.onCompactionEnded, (e: CompactionEndedNotification) => e.reason === "background");
      for (let i = 0; i < 4; i++) await client.append({ sessionId, entries: turn(i, 200 * (i + 1)) });
      // 1200 tokens: past the soft mark (0.7 of the 1500-token threshold), under the threshold.
      await client.append({ sessionId, entries: turn(4, 1200) });
      const answer = await client.turnEnded({ sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
      assert.equal(answer.action, "none");
      assert.ok((await ended).result, "the summary is ready");
      const token = started.values.find((s) => s.reason === "background")?.progressToken;
      assert.ok(token, "compaction/started names a progress token");
      await waitFor(() => progress.some((p) => p.token === token && p.value.kind === "end"), "the end of the progress");
      const kinds = progress.filter((p) => p.token === token).map((p) => p.value.kind);
      assert.equal(kinds[0], "begin");
      assert.equal(kinds.at(-1), "end");
    } finally {
      started.dispose();
      shown.dispose();
    }
  });
});
