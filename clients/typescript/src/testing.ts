/**
 * `@sessiond/client/testing`: support for testing code that talks to sessiond against
 * the real daemon, the way pytest-lsp does for Python language servers.
 *
 * - {@link sessiondCommand}: the daemon's command line, from `SESSIOND_COMMAND` or a venv.
 * - {@link createSandbox}: a temporary `HOME` and `XDG_*` directories, so a daemon under
 *   test never reads or writes the user's settings, sessions or sockets.
 * - {@link startSandboxedClient}: a started, initialized client on a daemon in a sandbox.
 * - {@link startListeningDaemon}: a daemon on a Unix socket or TCP, as an agent runs it.
 * - {@link userMessage}, {@link assistantMessage}, {@link turn}: entries to append, with
 *   usage figures, and {@link SMALL_COMPACTION_SETTINGS} / {@link SMALL_CONTEXT_WINDOW}
 *   for compactions after a few turns.
 * - {@link nextEvent}, {@link waitFor}: waiting without hanging a test.
 *
 * Nothing here depends on a test framework; it uses only Node and this package. It is a
 * separate entry point, so the main entry (`@sessiond/client`) does not load it.
 *
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Event } from "vscode-jsonrpc/node";
import { SessiondClient, type InitializeOptions } from "./client.js";
import type { InitializeResult } from "./generated/protocol.js";
import { DEFAULT_COMMAND, splitCommandLine } from "./transport.js";
import type { AssistantMessageInput, UserMessage } from "./generated/protocol.js";

// ------------------------------------------------------------------ the daemon's command

/** Where {@link sessiondCommand} looks for the daemon. */
export interface SessiondCommandOptions {
  /** The environment to read `SESSIOND_COMMAND` and `SESSIOND_VENV` from; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** The directory a relative venv path resolves against; default `process.cwd()`. */
  root?: string;
  /**
   * The venv to use when `SESSIOND_VENV` is unset or empty (relative to `root`). Without
   * one, the command is `sessiond serve --stdio`, found on `PATH`.
   */
  defaultVenv?: string;
  /**
   * Transport arguments that take the place of `--stdio`, e.g. `["--socket", path]` or
   * `["--tcp", "127.0.0.1:0"]` (appended when the command has no `--stdio`). An empty list
   * is the same as none.
   */
  transport?: readonly string[];
}

/**
 * The argv of the daemon under test, from the environment:
 *
 * 1. `SESSIOND_COMMAND`, when set and not empty: a whole command line, split like a
 *    shell would (quotes, backslashes, no expansion), used as it is. No other path is
 *    assumed, so it works wherever the daemon lives.
 * 2. Else the venv `SESSIOND_VENV` (or `options.defaultVenv`) running
 *    `python -m sessiond serve --stdio`; a relative venv path resolves against
 *    `options.root`, default the current working directory.
 * 3. Else `sessiond serve --stdio` from `PATH`.
 *
 * `options.transport` replaces `--stdio` for a daemon that listens instead.
 *
 * @example
 * await client.start({ command: sessiondCommand() });
 * const listening = sessiondCommand({ transport: ["--socket", socketPath] });
 */
export function sessiondCommand(options: SessiondCommandOptions = {}): string[] {
  const env = options.env ?? process.env;
  const command = daemonCommandFrom(env, options);
  if (!options.transport || options.transport.length === 0) return command;
  const stdio = command.lastIndexOf("--stdio");
  return stdio >= 0
    ? [...command.slice(0, stdio), ...options.transport, ...command.slice(stdio + 1)]
    : [...command, ...options.transport];
}

function daemonCommandFrom(env: NodeJS.ProcessEnv, options: SessiondCommandOptions): string[] {
  const configured = env.SESSIOND_COMMAND?.trim();
  if (configured) return splitCommandLine(configured);
  const venv = env.SESSIOND_VENV || options.defaultVenv;
  if (!venv) return [...DEFAULT_COMMAND];
  const dir = resolve(options.root ?? process.cwd(), venv);
  const python = process.platform === "win32" ? join(dir, "Scripts", "python.exe") : join(dir, "bin", "python");
  return [python, "-m", "sessiond", "serve", "--stdio"];
}

// ------------------------------------------------------------------ the sandbox

/** A temporary home for a daemon under test. */
export interface Sandbox {
  /** The temporary directory; `HOME`, with the `XDG_*` directories below it. */
  readonly dir: string;
  /**
   * The environment to run the daemon with: the base environment, `HOME` set to `dir`,
   * `XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_STATE_HOME`, `XDG_CACHE_HOME` and
   * `XDG_RUNTIME_DIR` set to `dir`'s `config`, `data`, `state`, `cache` and `run`
   * (created, mode 0700), and `SESSIOND_TOKEN` removed.
   */
  readonly env: NodeJS.ProcessEnv;
  /** Removes `dir` and all in it; calling it again does nothing. */
  cleanup(): void;
}

export interface SandboxOptions {
  /** The start of the temporary directory's name; default `"sessiond-test-"`. */
  prefix?: string;
  /** The environment the sandbox's `env` starts from; default `process.env`. */
  baseEnv?: NodeJS.ProcessEnv;
}

const XDG_DIRECTORIES = [
  ["XDG_CONFIG_HOME", "config"],
  ["XDG_DATA_HOME", "data"],
  ["XDG_STATE_HOME", "state"],
  ["XDG_CACHE_HOME", "cache"],
  ["XDG_RUNTIME_DIR", "run"],
] as const;

/**
 * A temporary directory (under the OS's temporary directory) to be the daemon's `HOME`
 * and `XDG_*` directories, so no test touches the user's files. Call `cleanup()` when done.
 * `SESSIOND_TOKEN` is left out of `env`: a token of the user's would otherwise reach the daemon.
 */
export function createSandbox(options: SandboxOptions = {}): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), options.prefix ?? "sessiond-test-"));
  const env: NodeJS.ProcessEnv = { ...(options.baseEnv ?? process.env), HOME: dir };
  for (const [name, sub] of XDG_DIRECTORIES) {
    const path = join(dir, sub);
    mkdirSync(path, { mode: 0o700 });
    env[name] = path;
  }
  delete env.SESSIOND_TOKEN;
  return { dir, env, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// ------------------------------------------------------------------ a client on its own daemon

export interface StartSandboxedClientOptions {
  /** The daemon's argv (it must serve on stdio); default {@link sessiondCommand}`()`. */
  command?: readonly string[];
  /**
   * The client to start, e.g. one with hooks registered (they must be before `initialize`);
   * default a new `SessiondClient`.
   */
  client?: SessiondClient;
  /**
   * The sandbox to run the daemon in; the caller removes it. Default: a new one, which
   * `stop()` removes.
   */
  sandbox?: Sandbox;
}

/** What {@link startSandboxedClient} resolves with. */
export interface SandboxedClient {
  /** The client, started and initialized. */
  readonly client: SessiondClient;
  /** The daemon's answer to `initialize`. */
  readonly initialized: InitializeResult;
  /** Where the daemon runs: its working directory, `HOME` and `XDG_*` directories. */
  readonly sandbox: Sandbox;
  /** Disposes of the client (`shutdown`, `exit`), then removes the sandbox if it made it. */
  stop(): Promise<void>;
}

/**
 * Starts a daemon on stdio in a sandbox (its working directory is the sandbox's `dir`),
 * and initializes a client on it with `initialize` (settings, `clientInfo`...). If
 * starting or initializing fails, the client is disposed of and a sandbox it made
 * removed before the error is thrown.
 *
 * @example
 * const client = new SessiondClient();
 * client.onBeforeCompact(() => ({ cancel: true }));
 * const daemon = await startSandboxedClient({ settings: SMALL_COMPACTION_SETTINGS }, { client });
 * try {
 *   const { sessionId } = await daemon.client.newSession({ cwd: daemon.sandbox.dir });
 * } finally {
 *   await daemon.stop();
 * }
 */
export async function startSandboxedClient(
  initialize: InitializeOptions = {},
  options: StartSandboxedClientOptions = {},
): Promise<SandboxedClient> {
  const ownSandbox = options.sandbox === undefined;
  const sandbox = options.sandbox ?? createSandbox();
  const client = options.client ?? new SessiondClient();
  const stop = async () => {
    try {
      await client.dispose();
    } finally {
      if (ownSandbox) sandbox.cleanup();
    }
  };
  let initialized: InitializeResult;
  try {
    await client.start({ command: options.command ?? sessiondCommand(), env: sandbox.env, cwd: sandbox.dir });
    initialized = await client.initialize(initialize);
  } catch (error) {
    await stop();
    throw error;
  }
  return { client, initialized, sandbox, stop };
}

// ------------------------------------------------------------------ a listening daemon

/** A daemon serving on a Unix socket or TCP, started by {@link startListeningDaemon}. */
export interface ListeningDaemon {
  readonly process: ChildProcess;
  /** Where it listens, as it announced it: `unix PATH` or `tcp HOST:PORT` (the real port). */
  readonly address: string;
  /** Sends SIGTERM (SIGKILL if it lingers for 5 s) and waits for the process to exit. */
  stop(): Promise<void>;
}

export interface ListeningDaemonOptions {
  /** The daemon's environment, e.g. a sandbox's `env` with `SESSIOND_TOKEN`; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** How long to wait for the daemon to listen; default 15000 ms. */
  timeoutMs?: number;
}

/**
 * Spawns a daemon that listens (`command` from {@link sessiondCommand} with a `transport`)
 * and resolves once it says where it listens. Rejects, with the daemon's output and after
 * stopping it, when it exits or stays silent for `timeoutMs`.
 *
 * @example
 * const box = createSandbox();
 * const socket = join(box.dir, "run", "agent.sock");
 * const daemon = await startListeningDaemon(sessiondCommand({ transport: ["--socket", socket] }), { env: box.env });
 * const client = await new SessiondClient().connect({ socket });
 */
export async function startListeningDaemon(
  command: readonly string[],
  options: ListeningDaemonOptions = {},
): Promise<ListeningDaemon> {
  const [file, ...args] = command;
  if (file === undefined) throw new Error("the daemon command is empty");
  const child = spawn(file, args, { env: options.env, cwd: options.cwd, stdio: ["ignore", "ignore", "pipe"] });
  const stop = () => stopProcess(child);
  const timeoutMs = options.timeoutMs ?? 15000;
  let output = "";
  try {
    const address = await new Promise<string>((resolvePromise, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the daemon did not listen within ${timeoutMs} ms; it said:\n${output}`)),
        timeoutMs,
      );
      child.stderr!.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        const found = /listening on (\S+ \S+)/.exec(output);
        if (found) {
          clearTimeout(timer);
          resolvePromise(found[1]!);
        }
      });
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(new Error(`cannot start ${command.join(" ")}: ${error.message}`));
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the daemon exited (${signal ?? code}):\n${output}`));
      });
    });
    return { process: child, address, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolvePromise) => child.once("exit", () => resolvePromise()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------ messages and entries

/**
 * Compaction settings for tests: small windows and the `chars` token estimator (about
 * four characters a token), so that with {@link SMALL_CONTEXT_WINDOW} a few
 * {@link turn}s reach the threshold and compactions are quick. Pass them as
 * `initialize({ settings })`.
 */
export const SMALL_COMPACTION_SETTINGS = {
  compaction: { reserveTokens: 1000, keepRecentTokens: 300, tokenEstimator: "chars" },
};

/**
 * The context window (tokens) to go with {@link SMALL_COMPACTION_SETTINGS}, e.g. as
 * `turnEnded({ contextWindow })`: with its 1000 reserved tokens, an answer reporting
 * 2000 tokens is past the threshold and one reporting 1000 is not.
 */
export const SMALL_CONTEXT_WINDOW = 2500;

/** A user message with `text` as its content, stamped now. */
export function userMessage(text: string): UserMessage & { content: string } {
  return { role: "user", content: text, timestamp: Date.now() };
}

/**
 * An assistant message answering `text` whose usage says the context held `tokens`
 * tokens (`totalTokens`; 50 of them output), which is what sessiond's context usage and
 * threshold checks read. Provider `test-provider`, model `test-model`, no cost.
 */
export function assistantMessage(text: string, tokens = 100): AssistantMessageInput {
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

/** The phrases a {@link turn} repeats: what the user asks and what the assistant answers. */
export interface TurnText {
  user: string;
  assistant: string;
}

const DEFAULT_TURN_TEXT: TurnText = { user: "please refactor the parser ", assistant: "the parser now reads tokens " };

/** A `message` entry to append. */
export type MessageEntryInput<M> = { type: "message"; message: M };

/**
 * Turn `i` as two `message` entries to append: the user's `task i: ...` and the
 * assistant's `done i: ...`, each phrase of `text` repeated 12 times (with the default
 * text, some 170 tokens a turn by the chars estimator: enough to fill a
 * {@link SMALL_CONTEXT_WINDOW} in a few turns). The answer reports a context of `tokens` tokens.
 *
 * @example
 * await client.append({ sessionId, entries: [...turn(1, 400), ...turn(2, 900)] });
 */
export function turn(
  i: number,
  tokens: number,
  text: TurnText = DEFAULT_TURN_TEXT,
): [MessageEntryInput<UserMessage & { content: string }>, MessageEntryInput<AssistantMessageInput>] {
  return [
    { type: "message", message: userMessage(`task ${i}: ${text.user.repeat(12)}`) },
    { type: "message", message: assistantMessage(`done ${i}: ${text.assistant.repeat(12)}`, tokens) },
  ];
}

// ------------------------------------------------------------------ waiting

/**
 * The next value of `event` that `predicate` accepts; rejects after `ms` (default 5000)
 * so a missing notification fails the test instead of hanging it. Subscribe before
 * causing the event: call this first, await it after.
 *
 * @example
 * const changed = nextEvent(client.onSessionChanged, (e) => e.sessionId === sessionId);
 * await client.append({ sessionId, entries: turn(1, 100) });
 * assert.equal((await changed).reason, "append");
 */
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

/**
 * Polls `condition` every 10 ms until it holds; rejects with "timed out waiting for
 * `what`" after `ms` (default 10000), so a broken expectation cannot hang a test.
 */
export async function waitFor(condition: () => boolean, what: string, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 10));
  }
}
