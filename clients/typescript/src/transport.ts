import { spawn, type ChildProcess } from "node:child_process";
import { createConnection, type Socket } from "node:net";
import { createInterface } from "node:readline";
import {
  SocketMessageReader,
  SocketMessageWriter,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageReader,
  type MessageWriter,
} from "vscode-jsonrpc/node";

/** The daemon on stdio, started by the client. */
export interface SpawnOptions {
  /** argv of the daemon; default `["sessiond", "serve", "--stdio"]`. */
  command?: readonly string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** A daemon that is already running: a Unix socket, or TCP with its token. */
export type ConnectOptions = { socket: string; token?: string } | { host?: string; port: number; token?: string };

export const DEFAULT_COMMAND: readonly string[] = ["sessiond", "serve", "--stdio"];

/** What a transport hands the client: framed streams and a way to end them. */
export interface Link {
  readonly reader: MessageReader;
  readonly writer: MessageWriter;
  readonly description: string;
  /** The child process, for `--stdio`. */
  readonly process?: ChildProcess;
  /** Resolves once with why the link ended (exit code and stderr tail, or socket close). */
  readonly closed: Promise<string>;
  /** End the link, politely first: wait `graceMs` for the peer to go, then force it. */
  close(graceMs: number): Promise<void>;
}

// Enough of the daemon's stderr to explain a crash without keeping a whole log.
const STDERR_TAIL_LINES = 20;

export async function spawnLink(options: SpawnOptions, onStderr: (line: string) => void): Promise<Link> {
  const command = options.command ?? DEFAULT_COMMAND;
  if (command.length === 0) throw new Error("the daemon command is empty");
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["pipe", "pipe", "pipe"],
    windowsHide: true,
  });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", (error) => reject(new Error(`cannot start ${command.join(" ")}: ${error.message}`)));
  });
  child.on("error", () => undefined); // after a successful spawn: a failed kill, reported by `closed`
  const tail: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (line) => {
    tail.push(line);
    if (tail.length > STDERR_TAIL_LINES) tail.shift();
    onStderr(line);
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  // 'close' comes after stderr has been read to the end, so the tail is complete.
  const closed = new Promise<string>((resolve) => {
    child.once("close", (code, signal) => {
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      resolve(`sessiond (${command.join(" ")}) ${how}${tail.length ? `; its last output:\n${tail.join("\n")}` : ""}`);
    });
  });
  // A daemon that dies mid-write must not crash the host process with EPIPE.
  child.stdin!.on("error", () => undefined);
  return {
    reader: new StreamMessageReader(child.stdout!),
    writer: new StreamMessageWriter(child.stdin!),
    description: `process ${child.pid} (${command.join(" ")})`,
    process: child,
    closed,
    async close(graceMs: number) {
      child.stdin!.end();
      if (await settlesWithin(exited, graceMs)) return;
      child.kill("SIGTERM");
      if (await settlesWithin(exited, graceMs)) return;
      child.kill("SIGKILL");
      await exited;
    },
  };
}

export async function connectLink(options: ConnectOptions): Promise<Link> {
  const description =
    "socket" in options ? `unix ${options.socket}` : `tcp ${options.host ?? "127.0.0.1"}:${options.port}`;
  const socket: Socket =
    "socket" in options
      ? createConnection({ path: options.socket })
      : createConnection({ host: options.host ?? "127.0.0.1", port: options.port });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", (error) =>
      reject(new Error(`cannot connect to sessiond on ${description}: ${error.message}`)),
    );
  });
  socket.on("error", () => undefined); // reported through `closed`
  const gone = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  return {
    reader: new SocketMessageReader(socket),
    writer: new SocketMessageWriter(socket),
    description,
    closed: gone.then(() => `the connection to sessiond on ${description} closed`),
    async close(graceMs: number) {
      socket.end();
      if (!(await settlesWithin(gone, graceMs))) socket.destroy();
      await gone;
    },
  };
}

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Splits a command line the way a POSIX shell would for the simple cases people put in
 * settings and environment variables: whitespace, single and double quotes, backslashes.
 * No expansion of any kind.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let current = "";
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
      else if (ch === "\\" && quote === '"' && i + 1 < line.length && '"\\$`'.includes(line[i + 1]!))
        current += line[++i];
      else current += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      inWord = true;
    } else if (ch === "\\" && i + 1 < line.length) {
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(current);
      current = "";
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote) throw new Error(`unterminated ${quote} quote in: ${line}`);
  if (inWord) words.push(current);
  return words;
}
