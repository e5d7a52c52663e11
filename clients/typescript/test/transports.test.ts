// Unix socket and TCP transports, several clients, and the lifecycle around the process.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SessiondClient, isSessiondError } from "@sessiond/client";
import {
  createSandbox,
  nextEvent,
  startListeningDaemon,
  turn,
  waitFor,
  type ListeningDaemon,
  type Sandbox,
} from "@sessiond/client/testing";
import { daemonCommand, startDaemon } from "./helpers";

describe("over a Unix socket", () => {
  let box: Sandbox;
  let daemon: ListeningDaemon;
  let socket: string;
  const clients: SessiondClient[] = [];

  before(async () => {
    box = createSandbox();
    socket = join(box.dir, "run", "test.sock");
    daemon = await startListeningDaemon(daemonCommand("--socket", socket), { env: box.env });
    assert.equal(daemon.address, `unix ${socket}`);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await daemon.stop();
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
  let daemon: ListeningDaemon;
  let port: number;
  const token = "test-token-0123456789";

  before(async () => {
    box = createSandbox();
    daemon = await startListeningDaemon(daemonCommand("--tcp", "127.0.0.1:0"), {
      env: { ...box.env, SESSIOND_TOKEN: token },
    });
    const match = /^tcp 127\.0\.0\.1:(\d+)$/.exec(daemon.address);
    assert.ok(match, daemon.address);
    port = Number(match[1]);
  });
  after(async () => {
    await daemon.stop();
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
    const box = createSandbox();
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

describe("a stream that is not JSON-RPC", () => {
  it("fails the waiting requests at once instead of leaving them unsettled", async () => {
    const box = createSandbox();
    const socket = join(box.dir, "broken.sock");
    // A peer that answers anything with a body that is not JSON.
    const body = '{"id":1,"re';
    const server = createServer((stream) => {
      stream.once("data", () => stream.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    const client = await new SessiondClient().connect({ socket });
    try {
      const error = await client.initialize().catch((e: unknown) => e);
      assert.ok(isSessiondError(error, "disconnected"), String(error));
      assert.match(error.message, /could not be read/);
      assert.equal(client.isClosed, true);
    } finally {
      await client.dispose();
      server.close();
      box.cleanup();
    }
  });
});
