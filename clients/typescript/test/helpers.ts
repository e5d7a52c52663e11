// Shared by the tests: the real daemon, isolated from the user's files.
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import {
  SessiondClient,
  splitCommandLine,
  type AssistantMessage,
  type Event,
  type InitializeOptions,
  type InitializeResult,
} from "@sessiond/client";

/** clients/typescript/build/test -> the repository root. */
export const repoRoot = resolve(__dirname, "..", "..", "..", "..");

/**
 * argv of the daemon on stdio: `$SESSIOND_COMMAND`, else the repo's venv
 * (`$SESSIOND_VENV`, default `.venv` at the root) running `python -m sessiond serve --stdio`.
 */
export function daemonCommand(): string[] {
  const configured = process.env.SESSIOND_COMMAND;
  if (configured) return splitCommandLine(configured);
  const venv = process.env.SESSIOND_VENV ?? ".venv";
  const python = join(isAbsolute(venv) ? venv : join(repoRoot, venv), "bin", "python");
  return [python, "-m", "sessiond", "serve", "--stdio"];
}

/** The daemon command with another transport instead of `--stdio`. */
export function daemonCommandFor(...transport: string[]): string[] {
  const command = daemonCommand();
  const stdio = command.lastIndexOf("--stdio");
  return stdio >= 0
    ? [...command.slice(0, stdio), ...transport, ...command.slice(stdio + 1)]
    : [...command, ...transport];
}

export interface Sandbox {
  dir: string;
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

/** A home and XDG directories of its own, so no test reads or writes the user's. */
export function sandbox(): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), "sessiond-ts-"));
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir };
  for (const [name, sub] of [
    ["XDG_CONFIG_HOME", "config"],
    ["XDG_DATA_HOME", "data"],
    ["XDG_CACHE_HOME", "cache"],
    ["XDG_STATE_HOME", "state"],
    ["XDG_RUNTIME_DIR", "run"],
  ] as const) {
    const path = join(dir, sub);
    mkdirSync(path, { mode: 0o700 });
    env[name] = path;
  }
  delete env.SESSIOND_TOKEN;
  return { dir, env, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Small windows and the chars estimator: compactions happen after a few turns, fast. */
export const SMALL_SETTINGS = {
  compaction: { reserveTokens: 1000, keepRecentTokens: 300, tokenEstimator: "chars" },
};
export const SMALL_WINDOW = 2500;

export interface Started {
  client: SessiondClient;
  initialized: InitializeResult;
  sandbox: Sandbox;
  stop(): Promise<void>;
}

/**
 * A client on its own daemon. `prepare` runs before `initialize`: the place for hooks.
 */
export async function startDaemon(
  options: InitializeOptions = {},
  prepare: (client: SessiondClient) => void = () => undefined,
): Promise<Started> {
  const box = sandbox();
  const client = new SessiondClient();
  prepare(client);
  let initialized: InitializeResult;
  try {
    await client.start({ command: daemonCommand(), env: box.env, cwd: box.dir });
    initialized = await client.initialize({ clientInfo: { name: "ts-tests" }, settings: SMALL_SETTINGS, ...options });
  } catch (error) {
    await client.dispose();
    box.cleanup();
    throw error;
  }
  return {
    client,
    initialized,
    sandbox: box,
    async stop() {
      await client.dispose();
      box.cleanup();
    },
  };
}

export function userMessage(text: string): { role: "user"; content: string; timestamp: number } {
  return { role: "user", content: text, timestamp: Date.now() };
}

/** An assistant message whose usage says the context held `tokens` tokens. */
export function assistantMessage(text: string, tokens = 100): AssistantMessage {
  return {
    role: "assistant",
    content: [{ type: "text", text }],
    api: "test",
    provider: "test-provider",
    model: "test-model",
    usage: {
      input: tokens - 50,
      output: 50,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: tokens,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: "stop",
    timestamp: Date.now(),
  };
}

/** Turns with enough text (about 150 tokens each by the chars estimator) to fill a small window. */
export function turn(i: number, tokens: number) {
  return [
    { type: "message", message: userMessage(`task ${i}: ${"please refactor the parser ".repeat(12)}`) },
    { type: "message", message: assistantMessage(`done ${i}: ${"the parser now reads tokens ".repeat(12)}`, tokens) },
  ];
}

/** The next event matching `predicate`, or a rejection after `ms`. */
export function nextEvent<T>(event: Event<T>, predicate: (value: T) => boolean = () => true, ms = 5000): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      subscription.dispose();
      reject(new Error(`no matching event within ${ms} ms`));
    }, ms);
    const subscription = event((value) => {
      if (!predicate(value)) return;
      clearTimeout(timer);
      subscription.dispose();
      resolvePromise(value);
    });
  });
}

/** Collects every value an event fires until `dispose`. */
export function record<T>(event: Event<T>): { values: T[]; dispose(): void } {
  const values: T[] = [];
  const subscription = event((value) => values.push(value));
  return { values, dispose: () => subscription.dispose() };
}

/** Polls `condition` until it holds; rejects after `ms` so a broken expectation cannot hang a test. */
export async function waitFor(condition: () => boolean, what: string, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(10);
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
