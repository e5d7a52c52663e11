// Command flows (compact, navigate, open) against the real daemon, with a scripted Ui.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { BeforeTreeHookParams, SessiondClient } from "@sessiond/client";
import { compactFlow, navigateFlow, pickSessionFlow, type PickItem } from "../src/core/flows";
import { createSandbox, waitFor, type Sandbox } from "@sessiond/client/testing";
import { ScriptedUi, filledSession, startClient, turn } from "./helpers";

describe("command flows", () => {
  let box: Sandbox;
  let client: SessiondClient;
  let holdCompaction = false;
  let compactionAsked = false;
  const treeAsks: BeforeTreeHookParams[] = [];

  before(async () => {
    box = createSandbox();
    client = await startClient(box, {}, (c) => {
      // Lets a test keep a compaction running until it cancels it.
      c.onBeforeCompact(async (_params, token) => {
        compactionAsked = true;
        if (holdCompaction) await new Promise<void>((resolve) => token.onCancellationRequested(() => resolve()));
        return undefined;
      });
      c.onBeforeTree((params) => {
        treeAsks.push(params);
        return undefined;
      });
    });
  });
  after(async () => {
    await client.dispose();
    box.cleanup();
  });

  it("compact: instructions reach the daemon, the result is reported", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    const ui = new ScriptedUi({ input: "  keep the loader decisions  " });
    const progress: string[] = [];
    const result = await compactFlow(client, sessionId, ui, { onProgress: (v) => progress.push(v.kind) });
    assert.ok(result);
    assert.equal(result.entry.type, "compaction");
    assert.match(String(result.entry.summary), /extractive/i);
    assert.deepEqual(ui.progressTitles, ["Compacting the session"]);
    assert.match(ui.infos[0] ?? "", /^Compacted: [\d.]+k? → [\d.]+k? tokens\.$/);
    assert.equal(progress[0], "begin");
    assert.equal(progress.at(-1), "end");
  });

  it("compact: dismissing the dialog sends nothing; refusals are information", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    compactionAsked = false;
    assert.equal(await compactFlow(client, sessionId, new ScriptedUi({ input: undefined })), undefined);
    assert.equal(compactionAsked, false, "no compaction/run was sent");

    const small = await client.newSession({ cwd: box.dir });
    await client.append({ sessionId: small.sessionId, entries: turn(1, 100) });
    const ui = new ScriptedUi({ input: "" });
    assert.equal(await compactFlow(client, small.sessionId, ui), undefined);
    assert.deepEqual(ui.infos, ["Nothing to compact yet."]);
    assert.deepEqual(ui.errors, []);

    const missing = new ScriptedUi({ input: "" });
    await compactFlow(client, "no-such-session", missing);
    assert.match(missing.errors[0] ?? "", /^sessiond: Session no-such-session is not open/);
  });

  it("compact: cancelling the progress cancels the request", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    const leaf = (await client.tree({ sessionId })).leafId;
    holdCompaction = true;
    compactionAsked = false;
    try {
      const ui = new ScriptedUi({ input: "" });
      const running = compactFlow(client, sessionId, ui);
      await waitFor(() => compactionAsked, "the compaction to start");
      ui.cancellation.cancel();
      assert.equal(await running, undefined);
      assert.deepEqual(ui.infos, ["Compaction cancelled."]);
      assert.equal((await client.tree({ sessionId })).leafId, leaf);
    } finally {
      holdCompaction = false;
    }
  });

  it("navigate: pick a node and a mode, with instructions", async () => {
    const { sessionId, ids } = await filledSession(client, box.dir, 3, 500);
    let shown: PickItem<unknown>[] = [];
    const ui = new ScriptedUi({
      pick: (items, title) => {
        if (title === "Navigate to…") {
          shown = items;
          return ids[1];
        }
        return "instructions";
      },
      input: "focus on the loader",
    });
    const result = await navigateFlow(client, sessionId, ui);
    assert.ok(result && !result.cancelled);
    assert.equal(shown.length, ids.length);
    assert.ok(
      shown.every((item) => String(item.label).startsWith("●")),
      "all on the active path before navigating",
    );
    assert.equal(result.summaryEntry?.type, "branch_summary");
    assert.equal(treeAsks.at(-1)?.customInstructions, "focus on the loader");
    assert.equal(treeAsks.at(-1)?.userWantsSummary, true);
    assert.deepEqual(ui.progressTitles, ["Summarizing the branch"]);
    const tree = await client.tree({ sessionId });
    assert.equal(
      tree.nodes.find((n) => n.id === ids.at(-1))?.active ?? false,
      false,
      "the old leaf is off the path now",
    );
  });

  it("navigate: a given target and mode skip the dialogs; a user message comes back as editor text", async () => {
    const { sessionId, ids } = await filledSession(client, box.dir, 2, 300);
    const ui = new ScriptedUi();
    const result = await navigateFlow(client, sessionId, ui, { targetId: ids[2]!, mode: "plain" });
    assert.equal(ui.picks.length, 0);
    assert.match(result?.editorText ?? "", /^task 1:/);
    assert.equal(result?.leafId, ids[1]);
    assert.equal(
      await navigateFlow(client, sessionId, new ScriptedUi({ pick: () => undefined })),
      undefined,
      "dismissed",
    );
  });

  it("open: lists the workspace's sessions, newest first, or browses", async () => {
    const older = await filledSession(client, box.dir, 1, 100, true);
    await new Promise((r) => setTimeout(r, 20));
    const newer = await filledSession(client, box.dir, 2, 100, true);
    await client.setName({ sessionId: newer.sessionId, name: "the newer one" });
    let items: PickItem<unknown>[] = [];
    const chosen = await pickSessionFlow(
      client,
      new ScriptedUi({ pick: (shown) => ((items = shown), shown[0]!.value) }),
      box.dir,
    );
    assert.equal(chosen, newer.path);
    assert.equal(items[0]!.label, "the newer one");
    assert.equal(items[1]!.detail, older.path);
    assert.match(String(items.at(-1)!.label), /Browse/);

    const browsed = await pickSessionFlow(
      client,
      new ScriptedUi({ pick: (shown) => shown.at(-1)!.value, file: "/some/file.jsonl" }),
      box.dir,
    );
    assert.equal(browsed, "/some/file.jsonl");
  });
});
