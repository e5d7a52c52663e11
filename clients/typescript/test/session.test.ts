// Requests on one daemon: lifecycle, sessions, context, errors with data.kind.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  HOOKS,
  METHOD_NAMES,
  METHOD_WRAPPERS,
  NOTIFICATION_NAMES,
  PROTOCOL_VERSION,
  SessiondError,
  isSessiondError,
} from "@sessiond/client";
import { assistantMessage, nextEvent, turn, userMessage } from "@sessiond/client/testing";
import { suiteDaemon } from "./helpers";

describe("a session over stdio", () => {
  const daemon = suiteDaemon();
  const { client } = daemon;

  it("initializes against a daemon serving exactly the schema's methods, notifications and hooks", async () => {
    const { serverInfo, protocolVersion, capabilities } = daemon.initialized;
    assert.equal(serverInfo.name, "sessiond");
    assert.equal(protocolVersion, PROTOCOL_VERSION);
    // A difference means protocol/schema.json (and so these types) lags the daemon.
    assert.deepEqual([...capabilities.methods].sort(), [...METHOD_NAMES].sort());
    for (const name of NOTIFICATION_NAMES) assert.ok(capabilities.notifications.includes(name), name);
    assert.deepEqual([...capabilities.hooks].sort(), Object.keys(HOOKS).sort());
    assert.equal(client.isInitialized, true);
    await assert.rejects(client.initialize(), /already initialized/);
  });

  it("creates a session, appends, and builds the context", async () => {
    const created = await client.newSession({ cwd: daemon.sandbox.dir });
    assert.match(created.sessionId, /^[0-9a-f-]{36}$/);
    assert.equal(created.header.cwd, daemon.sandbox.dir);
    assert.equal(created.persisted, false);

    const changed = nextEvent(client.onSessionChanged, (e) => e.sessionId === created.sessionId);
    // A field the schema does not list (a value, not a literal: literals are checked for typos).
    const withExtraField = { ...userMessage("hello"), extraField: "kept" };
    const appended = await client.append({
      sessionId: created.sessionId,
      entries: [
        { type: "message", message: withExtraField },
        { type: "message", message: assistantMessage("hi there", 120) },
      ],
    });
    assert.equal(appended.ids.length, 2);
    assert.equal(appended.leafId, appended.ids[1]);
    assert.equal(appended.usage.tokens, 120);

    const event = await changed;
    assert.equal(event.reason, "append");
    assert.deepEqual(event.appendedIds, appended.ids);
    assert.equal(event.leafId, appended.leafId);

    const context = await client.buildContext({ sessionId: created.sessionId });
    assert.deepEqual(
      context.messages.map((m) => m.role),
      ["user", "assistant"],
    );
    // Fields sessiond does not know travel untouched.
    const first: object = context.messages[0]!;
    assert.equal((first as Record<string, unknown>).extraField, "kept");
    assert.deepEqual(context.entryIds, appended.ids);

    const path = await client.path({ sessionId: created.sessionId });
    assert.deepEqual(
      path.entries.map((e) => [e.id, e.parentId]),
      [
        [appended.ids[0], null],
        [appended.ids[1], appended.ids[0]],
      ],
    );
    // An entry pruning never changed is its own original (pi's files are pruned by edits).
    const asWritten = await client.entry({
      sessionId: created.sessionId,
      entryId: appended.ids[0]!,
      original: true,
    });
    assert.equal(asWritten.fromArchive, false);
    assert.deepEqual(asWritten.entry, path.entries[0]);
    const usage = await client.contextUsage({ sessionId: created.sessionId, contextWindow: 1000 });
    assert.equal(usage.contextWindow, 1000);
    assert.equal(usage.percent, 12);
  });

  it("maps daemon errors to SessiondError with data.kind", async () => {
    const { sessionId } = await client.newSession({ cwd: daemon.sandbox.dir });
    const { leafId } = await client.append({ sessionId, entries: turn(1, 100) });

    const notFound = await client.entry({ sessionId, entryId: "nope" }).catch((e: unknown) => e);
    assert.ok(isSessiondError(notFound, "notFound"), String(notFound));
    assert.equal(notFound.code, -32010);
    assert.equal(notFound.data.entryId, "nope");
    assert.equal(notFound.method, "session/entry");

    const conflict = await client
      .append({ sessionId, entries: turn(2, 100), expectedLeafId: "not-the-leaf" })
      .catch((e: unknown) => e);
    assert.ok(isSessiondError(conflict, "conflict"), String(conflict));
    assert.equal((await client.contextUsage({ sessionId })).tokens, 100, "nothing was appended");

    const invalid = await client.request("session/append", { entries: [] } as never).catch((e: unknown) => e);
    assert.ok(isSessiondError(invalid, "invalidParams"), String(invalid));
    assert.equal(invalid.code, -32602);
    assert.match(invalid.message, /sessionId/);

    const nothing = await client.runCompaction({ sessionId }).catch((e: unknown) => e);
    assert.ok(nothing instanceof SessiondError);
    assert.equal(nothing.kind, "nothingToCompact");

    const unknownSession = await client.tree({ sessionId: "no-such-session" }).catch((e: unknown) => e);
    assert.ok(isSessiondError(unknownSession, "notFound"));
    assert.equal(unknownSession.data.sessionId, "no-such-session");
    assert.ok(leafId);
  });

  it("opens, lists, names and labels persisted sessions", async () => {
    const created = await client.newSession({ cwd: daemon.sandbox.dir, writeNow: true });
    const { ids } = await client.append({ sessionId: created.sessionId, entries: turn(1, 100) });
    await client.setName({ sessionId: created.sessionId, name: "refactoring" });
    await client.label({ sessionId: created.sessionId, targetId: ids[0]!, label: "start" });

    const listed = await client.listSessions({ cwd: daemon.sandbox.dir });
    const mine = listed.sessions.find((s) => s.sessionId === created.sessionId);
    assert.ok(mine, "the new session is listed");
    assert.equal(mine.name, "refactoring");
    assert.match(mine.firstMessage, /^task 1/);

    const tree = await client.tree({ sessionId: created.sessionId });
    const labelled = tree.nodes.find((n) => n.id === ids[0]);
    assert.equal(labelled?.label, "start");

    assert.deepEqual(await client.closeSession({ sessionId: created.sessionId }), { closed: true });
    const reopened = await client.openSession({ path: created.path });
    assert.equal(reopened.sessionId, created.sessionId);
    assert.equal(reopened.entryCount, 4, "two messages, the name and the label");
    assert.equal(reopened.name, "refactoring");
  });

  it("has a typed wrapper for every method of the schema", () => {
    assert.deepEqual(Object.keys(METHOD_WRAPPERS).sort(), [...METHOD_NAMES].sort());
    for (const wrapper of Object.values(METHOD_WRAPPERS)) {
      assert.equal(typeof (client as unknown as Record<string, unknown>)[wrapper], "function", wrapper);
    }
    assert.equal(PROTOCOL_VERSION, "1");
  });

  it("reads and updates settings", async () => {
    const before = await client.getSettings();
    const compaction = before.settings.compaction as Record<string, unknown>;
    assert.equal(compaction.reserveTokens, 1000, "initialize's settings apply to this connection");
    const updated = await client.updateSettings({ settings: { compaction: { keepRecentTokens: 500 } } });
    assert.equal((updated.settings.compaction as Record<string, unknown>).keepRecentTokens, 500);
    const bad = await client.updateSettings({ settings: { compaction: { noSuchKey: 1 } } }).catch((e: unknown) => e);
    assert.ok(isSessiondError(bad, "invalidParams"), String(bad));
  });
});
