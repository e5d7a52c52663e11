#!/usr/bin/env node
// pi 0.73.1 aborting a model request that the server never answers: the reference for
// bench/cancel_bench.py. pi's compaction summarizes through pi-ai's completeSimple with an
// AbortSignal; this makes the same call against the benchmark's loopback server.
//
//   node bench/pi_abort.mjs BASE_URL API RUNS
//
// API is openai-completions or anthropic-messages. For each run: start the request, wait
// until the server says it has it (GET BASE_URL/../arrived), abort, and time until the
// call settles. Prints one JSON line: {"settled": [ms...], "abortedAt": [epoch ms...]}.

const PI_AI = new URL(
  "../tests/parity/node_modules/@mariozechner/pi-ai/dist/index.js",
  import.meta.url,
);
const { completeSimple } = await import(PI_AI);

const [baseUrl, api, runsArg] = process.argv.slice(2);
const origin = new URL(baseUrl).origin;
const model = {
  id: "m",
  name: "m",
  api,
  provider: api === "anthropic-messages" ? "anthropic" : "openai",
  baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128000,
  maxTokens: 4096,
};
const context = {
  systemPrompt: "Summarize.",
  messages: [{ role: "user", content: "a conversation", timestamp: Date.now() }],
};

async function arrivals() {
  return Number(await (await fetch(`${origin}/arrived`)).text());
}

const settled = [];
const abortedAt = [];
for (let run = 0; run < Number(runsArg); run++) {
  const before = await arrivals();
  const controller = new AbortController();
  const call = completeSimple(model, context, {
    apiKey: "test",
    maxTokens: 100,
    signal: controller.signal,
  }).catch((error) => error);
  while ((await arrivals()) === before) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50)); // settled into waiting for the answer
  abortedAt.push(Date.now());
  const started = performance.now();
  controller.abort();
  await call;
  settled.push(performance.now() - started);
}
process.stdout.write(`${JSON.stringify({ settled, abortedAt })}\n`);
