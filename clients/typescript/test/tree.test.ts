// Tree navigation: branches, branch summaries, the before_tree hook, labels.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  isSessiondError,
  type BeforeTreeHookParams,
  type BeforeTreeHookResult,
  type TreeHookParams,
} from "@sessiond/client";
import { nextEvent, turn } from "@sessiond/client/testing";
import { delay, suiteDaemon } from "./helpers";

describe("tree navigation", () => {
  let answer: (params: BeforeTreeHookParams) => BeforeTreeHookResult | undefined = () => undefined;
  const asked: BeforeTreeHookParams[] = [];
  const told: TreeHookParams[] = [];
  const daemon = suiteDaemon({}, (c) => {
    c.onBeforeTree((params) => {
      asked.push(params);
      return answer(params);
    });
    c.onSessionTree((params) => told.push(params));
  });
  const { client } = daemon;

  /** Two turns, then back to the first assistant answer and a second branch of one turn. */
  async function branchedSession() {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const first = (await client.append({ sessionId, entries: [...turn(1, 100), ...turn(2, 200)] })).ids;
    const back = await client.navigateTree({ sessionId, targetId: first[1]! });
    assert.equal(back.cancelled, false);
    assert.equal(back.leafId, first[1]);
    const second = (await client.append({ sessionId, entries: turn(3, 300) })).ids;
    return { sessionId, first, second };
  }

  it("navigates without a summary and reports the branches in session/tree", async () => {
    answer = () => undefined;
    const { sessionId, first, second } = await branchedSession();
    const tree = await client.tree({ sessionId });
    assert.deepEqual(tree.rootIds, [first[0]]);
    assert.equal(tree.leafId, second[1]);
    const byId = new Map(tree.nodes.map((n) => [n.id, n]));
    assert.deepEqual(byId.get(first[1]!)?.children, [first[2], second[0]], "the branch point has both children");
    const active = tree.nodes.filter((n) => n.active).map((n) => n.id);
    assert.deepEqual(active, [first[0], first[1], second[0], second[1]]);
    assert.equal(byId.get(first[3]!)?.active ?? false, false);
    assert.equal(byId.get(first[0]!)?.role, "user");
    assert.match(byId.get(first[0]!)?.preview ?? "", /^user: task 1/);
  });

  it("summarizes the branch left behind (offline summarizer)", async () => {
    answer = () => undefined;
    const { sessionId, first, second } = await branchedSession();
    const changed = nextEvent(client.onSessionChanged, (e) => e.sessionId === sessionId && e.reason === "navigate");
    const result = await client.navigateTree({ sessionId, targetId: first[3]!, summarize: true, label: "back to 2" });
    assert.equal(result.cancelled, false);
    const summary = result.summaryEntry;
    assert.ok(summary, "a branch summary entry was written");
    assert.equal(summary.type, "branch_summary");
    assert.equal(summary.parentId, first[3]);
    assert.match(String(summary.summary), /task 3/, "it summarizes the branch that was left");
    const event = await changed;
    assert.ok(event.appendedIds?.includes(summary.id));
    assert.equal(event.leafId, result.leafId);

    const hookAsk = asked.at(-1)!;
    assert.equal(hookAsk.targetId, first[3]);
    assert.equal(hookAsk.oldLeafId, second[1]);
    assert.equal(hookAsk.commonAncestorId, first[1]);
    assert.deepEqual(hookAsk.entryIdsToSummarize, second);
    assert.equal(hookAsk.userWantsSummary, true);
    await delay(50);
    assert.equal(told.at(-1)?.oldLeafId, second[1]);
    assert.equal((told.at(-1)?.summaryEntry as { id?: string } | null)?.id, summary.id);

    const context = await client.buildContext({ sessionId });
    assert.deepEqual(
      context.messages.map((m) => m.role),
      ["user", "assistant", "user", "assistant", "branchSummary"],
    );

    // pi labels the summary, and the label entry (under it) becomes the leaf.
    const tree = await client.tree({ sessionId });
    assert.equal(tree.nodes.find((n) => n.id === summary.id)?.label, "back to 2");
    const leaf = tree.nodes.find((n) => n.id === tree.leafId);
    assert.equal(leaf?.type, "label");
    assert.equal(leaf?.parentId, summary.id);
  });

  it("lets session_before_tree cancel the navigation or supply the summary", async () => {
    const { sessionId, first, second } = await branchedSession();
    answer = () => ({ cancel: true });
    const cancelled = await client.navigateTree({ sessionId, targetId: first[3]!, summarize: true });
    assert.equal(cancelled.cancelled, true);
    assert.equal((await client.tree({ sessionId })).leafId, second[1], "the leaf stayed");

    answer = () => ({ summary: { summary: "The hook's own summary.", details: { from: "hook" } } });
    const supplied = await client.navigateTree({ sessionId, targetId: first[3]!, summarize: true });
    assert.equal(supplied.summaryEntry?.summary, "The hook's own summary.");
    assert.deepEqual(supplied.summaryEntry?.details, { from: "hook" });
  });

  it("puts a user message back in the editor when navigating to it", async () => {
    answer = () => undefined;
    const { sessionId, first } = await branchedSession();
    const result = await client.navigateTree({ sessionId, targetId: first[2]! });
    assert.match(result.editorText ?? "", /^task 2/);
    assert.equal(result.leafId, first[1], "the leaf is the message before it");
    const missing = await client.navigateTree({ sessionId, targetId: "nope" }).catch((e: unknown) => e);
    assert.ok(isSessiondError(missing, "notFound"), String(missing));
  });
});
