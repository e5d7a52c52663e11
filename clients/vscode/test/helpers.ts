// Shared by the tests: the real daemon (isolated), a scripted Ui, a scripted chat model.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import {
  CancellationTokenSource,
  SessiondClient,
  splitCommandLine,
  type AssistantMessage,
  type CancellationToken,
  type Event,
  type InitializeOptions,
} from "@sessiond/client";
import type { PickItem, Ui } from "../src/core/flows";
import type { ChatMessage, ChatModel } from "../src/core/llm";

/** clients/vscode/build/test -> the repository root. */
export const repoRoot = resolve(__dirname, "..", "..", "..", "..");

/** `$SESSIOND_COMMAND`, else `python -m sessiond serve --stdio` from the repo's venv (`$SESSIOND_VENV`). */
export function daemonCommand(): string[] {
  const configured = process.env.SESSIOND_COMMAND;
  if (configured) return splitCommandLine(configured);
  const venv = process.env.SESSIOND_VENV ?? ".venv";
  return [join(isAbsolute(venv) ? venv : join(repoRoot, venv), "bin", "python"), "-m", "sessiond", "serve", "--stdio"];
}

/** The daemon command with another transport instead of `--stdio`. */
export function daemonCommandFor(...transport: string[]): string[] {
  const command = daemonCommand();
  const stdio = command.lastIndexOf("--stdio");
  return stdio >= 0 ? [...command.slice(0, stdio), ...transport, ...command.slice(stdio + 1)] : [...command, ...transport];
}

/** A daemon serving on a Unix socket, as an agent would run it; resolves once it listens. */
export async function socketDaemon(box: Sandbox, socket: string): Promise<ChildProcess> {
  const [file, ...args] = daemonCommandFor("--socket", socket);
  const child = spawn(file!, args, { env: box.env, stdio: ["ignore", "ignore", "pipe"] });
  let output = "";
  await new Promise<void>((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not listen:\n${output}`)), 15000);
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(`listening on unix ${socket}`)) {
        clearTimeout(timer);
        resolvePromise();
      }
    });
    child.once("exit", (code) => reject(new Error(`the daemon exited (${code}):\n${output}`)));
  });
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolvePromise) => child.once("exit", resolvePromise));
  child.kill("SIGTERM");
  await exited;
}

export interface Sandbox {
  dir: string;
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

/** A home and XDG directories of its own, so no test touches the user's files. */
export function sandbox(): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), "sessiond-vscode-"));
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir };
  for (const [name, sub] of [
    ["XDG_CONFIG_HOME", "config"],
    ["XDG_DATA_HOME", "data"],
    ["XDG_CACHE_HOME", "cache"],
    ["XDG_STATE_HOME", "state"],
    ["XDG_RUNTIME_DIR", "run"],
  ] as const) {
    mkdirSync(join(dir, sub), { mode: 0o700 });
    env[name] = join(dir, sub);
  }
  return { dir, env, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Small windows and the chars estimator: compactions after a few turns, fast and offline. */
export const SMALL_SETTINGS = { compaction: { reserveTokens: 1000, keepRecentTokens: 300, tokenEstimator: "chars" } };
export const SMALL_WINDOW = 2500;

export async function startClient(
  box: Sandbox,
  options: InitializeOptions = {},
  prepare: (client: SessiondClient) => void = () => undefined,
): Promise<SessiondClient> {
  const client = new SessiondClient();
  prepare(client);
  try {
    await client.start({ command: daemonCommand(), env: box.env, cwd: box.dir });
    await client.initialize({ clientInfo: { name: "vscode-tests" }, settings: SMALL_SETTINGS, ...options });
  } catch (error) {
    await client.dispose();
    throw error;
  }
  return client;
}

export function assistantMessage(text: string, tokens: number): AssistantMessage {
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

/** A user message and its answer, about 150 tokens each by the chars estimator. */
export function turn(i: number, tokens: number) {
  return [
    {
      type: "message",
      message: { role: "user", content: `task ${i}: ${"rename the config loader ".repeat(12)}`, timestamp: Date.now() },
    },
    { type: "message", message: assistantMessage(`done ${i}: ${"the loader is renamed ".repeat(12)}`, tokens) },
  ];
}

/** A session with `turns` turns whose last answer reports `lastTokens` (past SMALL_WINDOW's threshold at 2000). */
export async function filledSession(
  client: SessiondClient,
  cwd: string,
  turns = 6,
  lastTokens = 2000,
  writeNow = false,
) {
  const created = await client.newSession({ cwd, writeNow });
  const ids: string[] = [];
  for (let i = 0; i < turns; i++) {
    ids.push(
      ...(
        await client.append({
          sessionId: created.sessionId,
          entries: turn(i, i === turns - 1 ? lastTokens : 200 * (i + 1)),
        })
      ).ids,
    );
  }
  return { ...created, ids };
}

/** A Ui answering from a script; what it was shown is kept for assertions. */
export class ScriptedUi implements Ui {
  readonly picks: { title: string; items: PickItem<unknown>[] }[] = [];
  readonly inputs: string[] = [];
  readonly infos: string[] = [];
  readonly errors: string[] = [];
  readonly progressTitles: string[] = [];
  /** The token handed to the running request; cancel it to test cancellation. */
  readonly cancellation = new CancellationTokenSource();

  constructor(
    private readonly answers: {
      pick?: (items: PickItem<unknown>[], title: string) => unknown;
      input?: string | undefined | ((title: string) => string | undefined);
      file?: string;
    } = {},
  ) {}

  async pick<T>(items: PickItem<T>[], options: { title: string }): Promise<T | undefined> {
    this.picks.push({ title: options.title, items });
    return this.answers.pick?.(items, options.title) as T | undefined;
  }
  async input(options: { title: string }): Promise<string | undefined> {
    this.inputs.push(options.title);
    const answer = this.answers.input;
    return typeof answer === "function" ? answer(options.title) : answer;
  }
  async pickFile(): Promise<string | undefined> {
    return this.answers.file;
  }
  progress<T>(title: string, run: (token: CancellationToken) => Promise<T>): Promise<T> {
    this.progressTitles.push(title);
    return run(this.cancellation.token);
  }
  info(message: string): void {
    this.infos.push(message);
  }
  error(message: string): void {
    this.errors.push(message);
  }
}

/** A chat model answering with `chunks`, or waiting for cancellation when `hang` is set. */
export class ScriptedChatModel implements ChatModel {
  readonly id = "scripted-model";
  readonly name = "Scripted";
  readonly requests: ChatMessage[][] = [];
  cancelled = false;

  constructor(private readonly behaviour: { chunks?: string[]; hang?: boolean; fail?: string } = {}) {}

  async *complete(
    messages: ChatMessage[],
    _options: { maxTokens: number },
    token: CancellationToken,
  ): AsyncIterable<string> {
    this.requests.push(messages);
    if (this.behaviour.fail) throw new Error(this.behaviour.fail);
    if (this.behaviour.hang) {
      await new Promise<void>((resolvePromise) => token.onCancellationRequested(() => resolvePromise()));
      this.cancelled = true;
      return;
    }
    for (const chunk of this.behaviour.chunks ?? []) yield chunk;
  }
}

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

export async function waitFor(condition: () => boolean, what: string, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
