// The llm/complete adapter: the daemon summarizes through a (scripted) editor chat model.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CancellationTokenSource, isSessiondError, type SessiondClient } from "@sessiond/client";
import { createLlmCompleteHandler, type ChatModel, type LlmCall } from "../src/core/llm";
import { SMALL_CONTEXT_WINDOW, createSandbox, waitFor, type Sandbox } from "@sessiond/client/testing";
import { ScriptedChatModel, filledSession, startClient } from "./helpers";

describe("llm/complete through a chat model", () => {
  let box: Sandbox;
  let client: SessiondClient;
  let model: ChatModel | undefined;
  const calls: LlmCall[] = [];

  before(async () => {
    box = createSandbox();
    client = await startClient(box, {}, (c) =>
      c.onLlmComplete(
        createLlmCompleteHandler(
          async () => model,
          (call) => calls.push(call),
        ),
      ),
    );
  });
  after(async () => {
    await client.dispose();
    box.cleanup();
  });

  /** A full session whose summaries go to this client first (then, if allowed, offline). */
  async function session(extractiveFallback: boolean) {
    const created = await filledSession(client, box.dir);
    await client.updateSettings({
      sessionId: created.sessionId,
      settings: { summarizer: { candidates: [{ kind: "client" }], extractiveFallback } },
    });
    return created.sessionId;
  }

  it("streams the model's answer into the compaction summary", async () => {
    const scripted = new ScriptedChatModel({ chunks: ["## Goal\n", "Rename the ", "config loader."] });
    model = scripted;
    const sessionId = await session(false);
    const result = await client.runCompaction({ sessionId });
    assert.match(String(result.entry.summary), /## Goal\nRename the config loader\./);
    const [messages] = scripted.requests;
    assert.equal(messages!.length, 1);
    assert.equal(messages![0]!.role, "user");
    assert.match(messages![0]!.content, /task 0: rename the config loader/, "the conversation is in the prompt");
    assert.ok(calls.length >= 1);
    assert.equal(calls[0]!.model, "Scripted");
    assert.ok(calls[0]!.answerChars >= "## Goal\nRename the config loader.".length);
  });

  it("passes the daemon's cancellation to the model", async () => {
    const scripted = new ScriptedChatModel({ hang: true });
    model = scripted;
    const sessionId = await session(false);
    const source = new CancellationTokenSource();
    const running = client.runCompaction({ sessionId }, { token: source.token });
    await waitFor(() => scripted.requests.length > 0, "the model to be asked");
    source.cancel();
    const error = await running.catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "cancelled"), String(error));
    await waitFor(() => scripted.cancelled, "the model to see the cancellation");
  });

  it("falls back to the offline summarizer at the end of a turn when no model is available", async () => {
    model = undefined;
    const sessionId = await session(true);
    await client.updateSettings({ sessionId, settings: { retry: { enabled: false } } });
    const result = await client.turnEnded({ sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.ok(result.compaction, "the threshold compaction still ran");
    const context = await client.buildContext({ sessionId });
    assert.equal(context.messages[0]!.role, "compactionSummary");
    assert.match(String(context.messages[0]!.summary), /extractive/i);
  });

  it("reports a failing or empty model on a manual compaction (pi's manual path does not fall back)", async () => {
    model = new ScriptedChatModel({ fail: "quota exceeded" });
    const sessionId = await session(true);
    const error = await client.runCompaction({ sessionId }).catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "summarizerFailed"), String(error));
    assert.match(error.message, /quota exceeded/);

    model = new ScriptedChatModel({ chunks: ["   "] });
    const empty = await client.runCompaction({ sessionId }).catch((e: unknown) => e);
    assert.ok(isSessiondError(empty, "summarizerFailed"), String(empty));
    assert.match(empty.message, /empty answer/);
  });
});
