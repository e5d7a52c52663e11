#!/usr/bin/env node
// Appends to an existing session file with pi 0.73.1's own SessionManager, as pi does
// while it works: one appendFileSync per entry, no lock. For the tests and the benchmark
// of sessiond following a file that another program writes.
//
//   node pi_append.mjs SESSION.jsonl COUNT [DELAY_MS]
//
// Appends COUNT messages (a user message, then an assistant answer, and so on) under the
// file's last entry, DELAY_MS apart (default 0). Prints one JSON line per entry as soon as
// it is on disk: {"id", "parentId", "writtenAt"} (writtenAt: Date.now() after the write).

import { SessionManager } from "@mariozechner/pi-coding-agent";

const [file, countArg, delayArg] = process.argv.slice(2);
if (!file || !countArg) {
  console.error("usage: node pi_append.mjs SESSION.jsonl COUNT [DELAY_MS]");
  process.exit(2);
}
const count = Number(countArg);
const delay = Number(delayArg ?? 0);
const manager = SessionManager.open(file);

const usage = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

for (let n = 0; n < count; n++) {
  const message = n % 2 === 0
    ? { role: "user", content: `pi asks ${n}`, timestamp: Date.now() }
    : { role: "assistant", content: [{ type: "text", text: `pi answers ${n}` }],
        api: "anthropic-messages", provider: "anthropic", model: "claude-test",
        usage, stopReason: "stop", timestamp: Date.now() };
  const id = manager.appendMessage(message);
  const entry = manager.getEntry(id);
  process.stdout.write(`${JSON.stringify({ id, parentId: entry.parentId, writtenAt: Date.now() })}\n`);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
}
