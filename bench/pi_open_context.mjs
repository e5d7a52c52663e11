#!/usr/bin/env node
// pi opening a session file and building its context, timed inside the process (node's
// start and pi's imports are not counted): the reference for bench/follow_bench.py.
//
//   node bench/pi_open_context.mjs SESSION.jsonl RUNS [0.73|1.6]
//
// 0.73 (the default) is pi 0.73.1 from tests/parity/node_modules; 1.6 is pi 1.6.0 from
// tests/parity/pi16/node_modules, its dist/core/session-manager.js loaded directly (the
// package's index and its command line need Node 22; that module loads on Node 20).
// Prints one JSON line: {"seconds": [each run], "messages": N, "entries": N}.

const MODULES = {
  "0.73": "../tests/parity/node_modules/@mariozechner/pi-coding-agent/dist/core/session-manager.js",
  "1.6": "../tests/parity/pi16/node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js",
};

const [file, runsArg, version = "0.73"] = process.argv.slice(2);
if (!file || !(version in MODULES)) {
  console.error("usage: node pi_open_context.mjs SESSION.jsonl RUNS [0.73|1.6]");
  process.exit(2);
}
const { SessionManager } = await import(new URL(MODULES[version], import.meta.url));
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
