// Unix socket and TCP transports, several clients, and the lifecycle around the process.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SessiondClient, isSessiondError } from "@sessiond/client";
import {
  daemonCommand,
  daemonCommandFor,
  nextEvent,
  sandbox,
  startDaemon,
  turn,
  waitFor,
  type Sandbox,
} from "./helpers";

/** Starts a listening daemon and resolves with what it announced ("unix PATH", "tcp HOST:PORT"). */
async function listeningDaemon(box: Sandbox, transport: string[], env: NodeJS.ProcessEnv = {}) {
  const [file, ...args] = daemonCommandFor(...transport);
  const child = spawn(file!, args, { env: { ...box.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let output = "";
  const where = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not listen; it said:\n${output}`)), 15000);
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (\S+ \S+)/.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`the daemon exited (${code}):\n${output}`)));
  });
  return { child, where };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

describe("over a Unix socket", () => {
  let box: Sandbox;
  let daemon: ChildProcess;
  let socket: string;
  const clients: SessiondClient[] = [];

  before(async () => {
    box = sandbox();
    socket = join(box.dir, "run", "test.sock");
    const started = await listeningDaemon(box, ["--socket", socket]);
    daemon = started.child;
    assert.equal(started.where, `unix ${socket}`);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await stop(daemon);
    box.cleanup();
  });

  async function connected(): Promise<SessiondClient> {
    const client = await new SessiondClient().connect({ socket });
    clients.push(client);
    return client;
  }

  it("refuses requests before initialize", async () => {
    const client = await connected();
    const error = await client.newSession({ cwd: box.dir }).catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "serverNotInitialized"), String(error));
    assert.equal(error.code, -32002);
  });

  it("keeps two clients of one session in sync", async () => {
    const writer = await connected();
    const watcher = await connected();
    await writer.initialize({ clientInfo: { name: "writer" } });
    await watcher.initialize({ clientInfo: { name: "watcher" }, optOutNotifications: ["compaction/started"] });
    const created = await writer.newSession({ cwd: box.dir, writeNow: true });
    const opened = await watcher.openSession({ path: created.path });
    assert.equal(opened.sessionId, created.sessionId, "one session, one id, for both");

    const seen = nextEvent(watcher.onSessionChanged, (e) => e.sessionId === created.sessionId);
    const { ids } = await writer.append({ sessionId: created.sessionId, entries: turn(1, 100) });
    assert.deepEqual((await seen).appendedIds, ids);
    const context = await watcher.buildContext({ sessionId: created.sessionId });
    assert.deepEqual(context.entryIds, ids);

    // A client that leaves does not take the daemon (or the other client) with it.
    await writer.dispose();
    assert.equal(writer.isClosed, true);
    assert.equal((await watcher.contextUsage({ sessionId: created.sessionId })).tokens, 100);
    const after = await writer.contextUsage({ sessionId: created.sessionId }).catch((e: unknown) => e);
    assert.ok(isSessiondError(after, "disconnected"), String(after));
  });
});

describe("over TCP", () => {
  let box: Sandbox;
  let daemon: ChildProcess;
  let port: number;
  const token = "test-token-0123456789";

  before(async () => {
    box = sandbox();
    const started = await listeningDaemon(box, ["--tcp", "127.0.0.1:0"], { SESSIOND_TOKEN: token });
    daemon = started.child;
    const match = /^tcp 127\.0\.0\.1:(\d+)$/.exec(started.where);
    assert.ok(match, started.where);
    port = Number(match[1]);
  });
  after(async () => {
    await stop(daemon);
    box.cleanup();
  });

  it("initializes with the token from connect", async () => {
    const client = await new SessiondClient().connect({ port, token });
    try {
      const result = await client.initialize();
      assert.equal(result.serverInfo.name, "sessiond");
      const { sessionId } = await client.newSession({ cwd: box.dir });
      assert.ok(sessionId);
    } finally {
      await client.dispose();
    }
  });

  it("is refused with a wrong token, and the daemon closes the connection", async () => {
    const client = await new SessiondClient().connect({ host: "127.0.0.1", port, token: "wrong" });
    const closed = nextEvent(client.onClose);
    const error = await client.initialize().catch((e: unknown) => e);
    assert.ok(isSessiondError(error, "unauthorized"), String(error));
    assert.equal(error.code, -32001);
    const event = await closed;
    assert.equal(event.expected, false);
    await client.dispose();
  });
});

describe("the daemon process", () => {
  it("reports a command that cannot start", async () => {
    const client = new SessiondClient();
    await assert.rejects(client.start({ command: ["/nonexistent/sessiond-binary", "serve"] }), /cannot start .*ENOENT/);
  });

  it("exits cleanly on dispose (shutdown, exit)", async () => {
    const daemon = await startDaemon();
    const child = daemon.client.process!;
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const closed = nextEvent(daemon.client.onClose);
    await daemon.stop();
    assert.equal(await exited, 0);
    assert.equal((await closed).expected, true);
    await daemon.client.dispose(); // twice is fine
  });

  it("rejects pending requests with kind disconnected when the daemon dies", async () => {
    let hookCalled = false;
    const box = sandbox();
    const client = new SessiondClient();
    client.onBeforeCompact(() => {
      hookCalled = true;
      return new Promise(() => undefined); // never answers: the daemon waits
    });
    await client.start({ command: daemonCommand(), env: box.env });
    try {
      await client.initialize({ settings: { compaction: { keepRecentTokens: 100, tokenEstimator: "chars" } } });
      const { sessionId } = await client.newSession({ cwd: box.dir });
      for (let i = 0; i < 4; i++) await client.append({ sessionId, entries: turn(i, 300) });
      const closed = nextEvent(client.onClose);
      const pending = client.runCompaction({ sessionId });
      await waitFor(() => hookCalled, "the hook");
      client.process!.kill("SIGKILL");
      const error = await pending.catch((e: unknown) => e);
      assert.ok(isSessiondError(error, "disconnected"), String(error));
      assert.match(error.message, /SIGKILL/);
      const event = await closed;
      assert.equal(event.expected, false);
      assert.equal(client.isClosed, true);
    } finally {
      await client.dispose();
      box.cleanup();
    }
  });
});
