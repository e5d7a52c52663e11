#!/usr/bin/env node
// pi 0.73.1 opening a session file and building its context, timed inside the process
// (node's start and pi's imports are not counted): the reference for bench/follow_bench.py.
//
//   node bench/pi_open_context.mjs SESSION.jsonl RUNS
//
// Prints one JSON line: {"seconds": [each run], "messages": N, "entries": N}.

const PI_DIST = new URL(
  "../tests/parity/node_modules/@mariozechner/pi-coding-agent/dist/",
  import.meta.url,
);
const { SessionManager } = await import(new URL("core/session-manager.js", PI_DIST));

const [file, runsArg] = process.argv.slice(2);
const runs = Number(runsArg ?? 5);
const seconds = [];
let messages = 0;
let entries = 0;
for (let run = 0; run < runs; run++) {
  const started = process.hrtime.bigint();
  const manager = SessionManager.open(file);
  const context = manager.buildSessionContext();
  seconds.push(Number(process.hrtime.bigint() - started) / 1e9);
  messages = context.messages.length;
  entries = manager.getEntries().length;
}
process.stdout.write(`${JSON.stringify({ seconds, messages, entries })}\n`);
