// Command flows (compact, navigate, open) against the real daemon, with a scripted Ui.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { BeforeTreeHookParams, SessiondClient } from "@sessiond/client";
import {
  compactFlow,
  coveredFlow,
  navigateFlow,
  pickSessionFlow,
  undoCompactionFlow,
  type PickItem,
} from "../src/core/flows";
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

  it("undo: takes the last compaction back and names the new leaf; then there is nothing to undo", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    const compacted = await client.runCompaction({ sessionId });
    const after = await client.append({ sessionId, entries: turn(9, 300) });
    const ui = new ScriptedUi();
    const undone = await undoCompactionFlow(client, sessionId, ui);
    assert.ok(undone);
    assert.equal(undone.undoneEntryId, compacted.entry.id);
    assert.deepEqual(undone.copiedFrom, after.ids, "the turn after the compaction is copied back");
    const tree = await client.tree({ sessionId });
    assert.equal(tree.leafId, undone.leafId);
    assert.equal(tree.nodes.find((n) => n.id === compacted.entry.id)?.active ?? false, false, "off the path now");
    assert.deepEqual(ui.errors, []);
    assert.equal(ui.infos.length, 1);
    assert.equal(
      ui.infos[0],
      "Compaction undone: the context is the one before it again, with the 2 entries after it copied back. " +
        `The leaf is now assistant: done 9: the loader is renamed the loader is rena… (${undone.leafId}). ` +
        "The compaction stays on the branch left behind (Navigate To… goes back to it).",
    );

    const none = new ScriptedUi();
    assert.equal(await undoCompactionFlow(client, sessionId, none), undefined);
    assert.deepEqual(none.infos, ["Nothing to undo: the context has no compaction."]);
    assert.deepEqual(none.errors, [], "not shown as an error");
    assert.equal((await client.tree({ sessionId })).leafId, undone.leafId, "nothing moved");
  });

  it("undo: a compaction that is not the newest any more is refused, not undone", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    const first = await client.runCompaction({ sessionId });
    for (let i = 10; i < 16; i++) await client.append({ sessionId, entries: turn(i, 200) });
    await client.runCompaction({ sessionId });
    const leaf = (await client.tree({ sessionId })).leafId;
    const ui = new ScriptedUi();
    assert.equal(await undoCompactionFlow(client, sessionId, ui, first.entry.id), undefined);
    assert.deepEqual(ui.infos, ["That compaction is not the newest one of the context any more; nothing was undone."]);
    assert.equal((await client.tree({ sessionId })).leafId, leaf);
  });

  it("covered: lists what the newest summary stands for, page by page, and the previous summary's", async () => {
    const { sessionId, ids } = await filledSession(client, box.dir);
    const first = await client.runCompaction({ sessionId });
    const later: string[] = [];
    for (let i = 10; i < 16; i++) later.push(...(await client.append({ sessionId, entries: turn(i, 200) })).ids);
    const second = await client.runCompaction({ sessionId });
    const shown: { title: string; items: PickItem<unknown>[] }[] = [];
    const ui = new ScriptedUi({
      pick: (items, title) => {
        shown.push({ title, items });
        // First the newest summary's entries: go on to the previous one's; there, pick one.
        return shown.length === 1 ? items.at(-1)!.value : items[1]!.value;
      },
    });
    // Pages of two ids: the flow follows nextOffset to the end.
    const picked = await coveredFlow(client, sessionId, ui, undefined, 2);

    const ofFirst = ids.slice(0, ids.indexOf(String(first.entry.firstKeptEntryId)));
    const all = [...ids, ...later];
    const ofSecond = all.slice(
      all.indexOf(String(first.entry.firstKeptEntryId)),
      all.indexOf(String(second.entry.firstKeptEntryId)),
    );
    assert.ok(ofFirst.length > 2 && ofSecond.length > 2, "more than one page each");
    const entryIds = (items: PickItem<unknown>[]) =>
      items.flatMap((item) =>
        "entry" in (item.value as object) ? [(item.value as { entry: { id: string } }).entry.id] : [],
      );
    assert.equal(shown.length, 2);
    assert.match(
      shown[0]!.title,
      new RegExp(`^What the summary ${second.entry.id} stands for: ${ofSecond.length} entries$`),
    );
    assert.deepEqual(entryIds(shown[0]!.items), ofSecond, "the entries it replaced, oldest first");
    assert.match(String(shown[0]!.items.at(-1)!.label), /previous summary/);
    assert.match(
      String(shown[0]!.items[0]!.label),
      /^(user: task|assistant: done) \d+: (rename the config loader|the loader is renamed)/,
    );
    assert.match(String(shown[0]!.items[0]!.description), /^message \((user|assistant)\) · /);
    assert.match(shown[1]!.title, new RegExp(`^What the summary ${first.entry.id} stands for`));
    assert.deepEqual(entryIds(shown[1]!.items), ofFirst);
    assert.equal(picked?.id, ofFirst[1], "the entry picked comes back, to be shown");
  });

  it("covered: a given compaction, a dismissed pick, and a session without a compaction", async () => {
    const { sessionId } = await filledSession(client, box.dir);
    const none = new ScriptedUi();
    assert.equal(await coveredFlow(client, sessionId, none), undefined);
    assert.deepEqual(none.infos, ["The context has no compaction yet."]);
    assert.equal(none.picks.length, 0);

    const compacted = await client.runCompaction({ sessionId });
    const ui = new ScriptedUi({ pick: () => undefined });
    assert.equal(await coveredFlow(client, sessionId, ui, compacted.entry.id), undefined);
    assert.equal(ui.picks.length, 1);
    const covered = await client.coveredByCompaction({ sessionId, entryId: compacted.entry.id });
    assert.equal(ui.picks[0]!.items.length, covered.total, "no previous summary to offer");

    const wrong = new ScriptedUi();
    await coveredFlow(client, sessionId, wrong, "no-such-entry");
    assert.deepEqual(wrong.infos, ["That compaction is not in the session."]);
  });
});
