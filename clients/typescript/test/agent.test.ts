// The pi event bridge: message_end appends, agent_end runs the end-of-turn checks.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentSessionBridge, isSessiondError, type AgentEvent, type ToolResultMessage } from "@sessiond/client";
import { SMALL_CONTEXT_WINDOW, assistantMessage, userMessage } from "@sessiond/client/testing";
import { suiteDaemon } from "./helpers";

function toolResult(id: string, text: string): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: id,
    toolName: "read",
    content: [{ type: "text", text }],
    isError: false,
    timestamp: Date.now(),
  };
}

/** One agent run as pi emits it: start events, a tool round trip, the answer, the end. */
function agentRun(i: number, tokens: number): AgentEvent[] {
  const ask = userMessage(`task ${i}: ${"please look at the lexer ".repeat(12)}`);
  const call = {
    ...assistantMessage("", tokens - 50),
    content: [{ type: "toolCall" as const, id: `call-${i}`, name: "read", arguments: { path: "lexer.ts" } }],
    stopReason: "toolUse" as const,
  };
  const result = toolResult(`call-${i}`, "export function lex() {}\n".repeat(20));
  const answer = assistantMessage(`done ${i}: ${"the lexer is fine ".repeat(12)}`, tokens);
  return [
    { type: "agent_start" },
    { type: "message_start", message: ask },
    { type: "message_end", message: ask },
    { type: "turn_start" },
    { type: "message_start", message: call },
    { type: "message_update", message: call },
    { type: "message_end", message: call },
    { type: "tool_execution_start", toolCallId: `call-${i}` },
    { type: "message_end", message: result },
    { type: "message_end", message: answer },
    { type: "turn_end", message: answer, toolResults: [result] },
    { type: "agent_end", messages: [ask, call, result, answer] },
  ];
}

describe("AgentSessionBridge", () => {
  const daemon = suiteDaemon();
  const { client } = daemon;

  it("persists user, assistant and toolResult messages in order, even when not awaited", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const bridge = new AgentSessionBridge(client, sessionId, { contextWindow: 100_000 });
    const events = agentRun(1, 400);
    // A frontend's event callback is synchronous: fire everything, wait once.
    const decisions = events.map((event) => bridge.handle(event));
    const settled = await Promise.all(decisions);
    await bridge.idle();

    const path = await client.path({ sessionId });
    assert.deepEqual(
      path.entries.map((e) => (e.type === "message" ? e.message.role : e.type)),
      ["user", "assistant", "toolResult", "assistant"],
    );
    const result = path.entries[2];
    assert.ok(result?.type === "message" && result.message.role === "toolResult");
    assert.equal(result.message.toolCallId, "call-1");
    assert.equal(bridge.leafId, path.entries.at(-1)!.id);
    const decision = settled.at(-1);
    assert.equal(decision?.action, "none");
    assert.equal(decision?.compacted, false);
    assert.ok(
      settled.slice(0, -1).every((d) => d === undefined),
      "only agent_end decides",
    );
  });

  it("persists custom messages as custom_message entries and skips other roles", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const bridge = new AgentSessionBridge(client, sessionId);
    await bridge.handle({
      type: "message_end",
      message: { role: "custom", customType: "note", content: "remember", display: true, timestamp: Date.now() },
    });
    await bridge.handle({
      type: "message_end",
      message: { role: "bashExecution", command: "ls", output: "", timestamp: Date.now() },
    });
    await bridge.appendMessage({
      role: "bashExecution",
      command: "pwd",
      output: "/tmp",
      exitCode: 0,
      cancelled: false,
      truncated: false,
      timestamp: Date.now(),
    });
    const path = await client.path({ sessionId });
    assert.deepEqual(
      path.entries.map((e) => e.type),
      ["custom_message", "message"],
    );
    const [custom, bash] = path.entries;
    assert.ok(custom?.type === "custom_message");
    assert.equal(custom.customType, "note");
    assert.ok(bash?.type === "message" && bash.message.role === "bashExecution");
    assert.equal(bash.message.command, "pwd");
  });

  it("answers agent_end with continue and a prompt after a threshold compaction", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const bridge = new AgentSessionBridge(client, sessionId, { contextWindow: () => SMALL_CONTEXT_WINDOW });
    let last;
    for (let i = 0; i < 4; i++) {
      for (const event of agentRun(i, 400 * (i + 1))) last = await bridge.handle(event);
    }
    assert.ok(last, "agent_end gave a decision");
    assert.equal(last.action, "continue");
    assert.equal(last.compacted, true);
    assert.ok(last.prompt && last.prompt.length > 20);
    assert.equal(last.result.compaction?.reason, "threshold");

    const messages = await bridge.context();
    assert.equal(messages[0]!.role, "compactionSummary");
    assert.ok(messages.length < 16, "older messages were folded into the summary");
  });

  it("with guardLeaf, refuses to append after another client moved the leaf", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const bridge = new AgentSessionBridge(client, sessionId, { guardLeaf: true });
    for (const event of agentRun(1, 300)) await bridge.handle(event);
    const path = await client.path({ sessionId });
    await client.navigateTree({ sessionId, targetId: path.entries[1]!.id });
    const error = await bridge.handle({ type: "message_end", message: userMessage("next") }).catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "conflict"), String(error));
  });
});
