// The controller: the daemon's lifecycle, the open session, views kept in sync by notifications.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { SessiondClient, type ProgressParams } from "@sessiond/client";
import {
  DEFAULT_CONFIG,
  initializeSettings,
  needsRestart,
  normalizeConfig,
  type ExtensionConfig,
} from "../src/core/config";
import { SessionController } from "../src/core/controller";
import type { StatusView } from "../src/core/status";
import {
  SMALL_COMPACTION_SETTINGS,
  SMALL_CONTEXT_WINDOW,
  createSandbox,
  nextEvent,
  startListeningDaemon,
  waitFor,
  type Sandbox,
} from "@sessiond/client/testing";
import { ScriptedChatModel, ScriptedUi, daemonCommand, filledSession, repoRoot, turn } from "./helpers";

const run = promisify(execFile);

function config(overrides: Partial<ExtensionConfig> = {}): ExtensionConfig {
  return {
    ...DEFAULT_CONFIG,
    command: daemonCommand(),
    settings: SMALL_COMPACTION_SETTINGS,
    contextWindow: SMALL_CONTEXT_WINDOW,
    ...overrides,
  };
}

describe("configuration", () => {
  it("normalizes hand-edited settings", () => {
    assert.deepEqual(normalizeConfig({}), DEFAULT_CONFIG);
    const odd = normalizeConfig({ command: [], contextWindow: -5, settings: [], llm: { enabled: "yes", vendor: 3 } });
    assert.deepEqual(odd, DEFAULT_CONFIG);
    assert.equal(normalizeConfig({ contextWindow: 200000.7 }).contextWindow, 200000);
    assert.equal(normalizeConfig({ socket: "  /run/agent.sock " }).socket, "/run/agent.sock");
  });

  it("sends settings that VS Code handed out as read-only proxies", () => {
    // What workspace.getConfiguration().get() returns for an object setting: a proxy that
    // refuses writes. structuredClone cannot copy a proxy, and the daemon never started.
    const readOnly = <T extends object>(value: T): T =>
      new Proxy(value, {
        set: () => {
          throw new TypeError("read-only");
        },
        get: (target, key) => {
          const inner = Reflect.get(target, key) as unknown;
          return typeof inner === "object" && inner !== null ? readOnly(inner) : inner;
        },
      });
    const settings = readOnly({ compaction: { keepRecentTokens: 1500 } });
    for (const enabled of [false, true]) {
      const config = normalizeConfig({ settings, llm: { enabled } });
      const sent = initializeSettings(config);
      assert.equal(sent.compaction && (sent.compaction as { keepRecentTokens: number }).keepRecentTokens, 1500);
      assert.doesNotThrow(() => structuredClone(sent));
    }
  });

  it("puts the client summarizer first when the editor's model is enabled", () => {
    const user = {
      summarizer: { candidates: [{ kind: "openai", model: "m" }, { kind: "client" }], extractiveFallback: false },
      storage: { fsync: "always" },
    };
    assert.deepEqual(initializeSettings({ ...DEFAULT_CONFIG, settings: user }), user, "unchanged when disabled");
    const enabled = initializeSettings({
      ...DEFAULT_CONFIG,
      settings: user,
      llm: { enabled: true, vendor: "", family: "" },
    });
    assert.deepEqual(enabled, {
      summarizer: { candidates: [{ kind: "client" }, { kind: "openai", model: "m" }], extractiveFallback: false },
      storage: { fsync: "always" },
    });
    assert.deepEqual(user.summarizer.candidates.length, 2, "the user's object is not modified");
  });

  it("restarts the daemon only for what it was started with", () => {
    const base = DEFAULT_CONFIG;
    assert.equal(needsRestart(base, { ...base, contextWindow: 5000 }), false);
    assert.equal(needsRestart(base, { ...base, llm: { ...base.llm, family: "x" } }), false);
    assert.equal(needsRestart(base, { ...base, llm: { ...base.llm, enabled: true } }), true);
    assert.equal(needsRestart(base, { ...base, settings: { compaction: { enabled: false } } }), true);
    assert.equal(needsRestart(base, { ...base, command: ["other"] }), true);
    assert.equal(needsRestart(base, { ...base, socket: "/run/agent.sock" }), true);
  });
});

describe("SessionController", () => {
  let box: Sandbox;
  let controller: SessionController;
  const log: string[] = [];
  const views: StatusView[] = [];

  before(() => {
    box = createSandbox();
    controller = new SessionController({ config: config(), cwd: box.dir, env: box.env, log: (line) => log.push(line) });
    controller.onDidChangeStatus((view) => views.push(view));
  });
  after(async () => {
    await controller.dispose();
    box.cleanup();
  });

  it("opens a session and follows its changes: tree, usage, compaction", async () => {
    const client: SessiondClient = await controller.ensureClient();
    const created = await filledSession(client, box.dir, 5, 900, true);
    const opened = await controller.openSession(created.path);
    assert.equal(opened.sessionId, created.sessionId);
    assert.equal((await controller.treeModel()).length, 10);
    assert.match(controller.status.text, /^\$\(history\) 36% · 900\/2\.5k$/);

    const treeChanged = nextEvent(controller.onDidChangeTree);
    const usageShown = nextEvent(controller.onDidChangeStatus, (v) => v.text.includes("1.9k/2.5k"));
    await client.append({ sessionId: created.sessionId, entries: turn(7, 1900) });
    await treeChanged;
    assert.ok((await usageShown).warning, "past the threshold");

    views.length = 0;
    const result = await client.turnEnded({ sessionId: created.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.ok(result.compaction);
    await waitFor(
      () => views.some((v) => /Compacted \(threshold\)/.test(v.tooltip) && !v.warning),
      "the compaction's outcome",
    );
    assert.ok(
      views.some((v) => v.text.startsWith("$(sync~spin) Compacting")),
      "the spinner was shown while it ran",
    );
    assert.ok((await controller.treeModel()).some((row) => row.kind === "compaction"));
  });

  it("runs the compact and navigate commands through the Ui", async () => {
    const client = await controller.ensureClient();
    const created = await filledSession(client, box.dir, 6, 1500, true);
    await controller.openSession(created.path);
    views.length = 0;
    const compacted = await controller.compact(new ScriptedUi({ input: "" }));
    assert.ok(compacted);
    assert.ok(
      views.some((v) => v.text.startsWith("$(sync~spin)")),
      "progress reached the status",
    );

    const ui = new ScriptedUi();
    const navigated = await controller.navigate(ui, { targetId: created.ids[1]!, mode: "plain" });
    assert.equal(navigated?.leafId, created.ids[1]);
    const rows = await controller.treeModel();
    assert.equal(rows.find((r) => r.leaf)?.id, created.ids[1]);
  });

  it("shows a summary written in the background, its commit, what it stands for and its undo", async () => {
    const client = await controller.ensureClient();
    // The last answer measures 1200 tokens: past the soft mark (0.7 of the 1500 threshold), under it.
    const created = await filledSession(client, box.dir, 6, 1200, true);
    await controller.openSession(created.path);
    views.length = 0;
    const tokens: string[] = [];
    const progress: ProgressParams[] = [];
    const watching = [
      client.onCompactionStarted((event) => event.progressToken && tokens.push(event.progressToken)),
      client.onProgress((params) => progress.push(params)),
    ];
    const soft = await client.turnEnded({ sessionId: created.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.equal(soft.action, "none");
    await waitFor(() => controller.status.text.endsWith("$(pass)"), "the background summary to be ready");
    // The extension accepts the daemon's token: the summary's progress reaches the status.
    await waitFor(
      () => progress.some((p) => p.token === tokens[0] && p.value.kind === "end"),
      "the background summary's progress",
    );
    watching.forEach((w) => w.dispose());
    assert.ok(
      views.some((v) => v.text.endsWith("$(loading~spin)") && /being written in the background/.test(v.tooltip)),
      "shown while it was written, beside the usage",
    );
    assert.ok(!views.some((v) => v.text.startsWith("$(sync~spin)")), "never as a compaction the agent waits for");

    await client.append({ sessionId: created.sessionId, entries: turn(7, 1600) });
    const over = await client.turnEnded({ sessionId: created.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.ok(over.compaction?.prepared, "the threshold committed the background summary");
    await waitFor(
      () => /Compacted \(threshold, summary written in the background\)/.test(controller.status.tooltip),
      "the commit's outcome",
    );
    assert.doesNotMatch(controller.status.text, /\$\(pass\)|loading/);

    const coveredUi = new ScriptedUi({ pick: () => undefined });
    await controller.showCovered(coveredUi);
    assert.match(
      coveredUi.picks[0]?.title ?? "",
      new RegExp(`^What the summary ${over.compaction.entryId} stands for: \\d+ entries$`),
    );

    const ui = new ScriptedUi();
    const undone = await controller.undoCompaction(ui);
    assert.equal(undone?.undoneEntryId, over.compaction.entryId);
    assert.match(ui.infos[0] ?? "", /^Compaction undone: .* The leaf is now /);
    await waitFor(() => /Compaction undone/.test(controller.status.tooltip), "the status to say so");
    const again = new ScriptedUi();
    await controller.undoCompaction(again);
    assert.deepEqual(again.infos, ["Nothing to undo: the context has no compaction."]);
  });

  it("says once that the no-loop rule paused automatic compaction, and what to do", async () => {
    const client = await controller.ensureClient();
    const created = await filledSession(client, box.dir, 14, 2000, true);
    // The part a compaction keeps alone is over the threshold (1500): it would loop.
    await client.updateSettings({
      sessionId: created.sessionId,
      settings: { compaction: { keepRecentTokens: 1600, backgroundAt: 0 } },
    });
    await controller.openSession(created.path);
    const warnings: string[] = [];
    const listening = controller.onDidWarn((message) => warnings.push(message));
    try {
      const first = await client.turnEnded({ sessionId: created.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
      assert.ok(
        first.compaction && first.compaction.tokensAfter > (first.usage?.threshold ?? Infinity),
        "it freed too little",
      );
      for (let i = 20; i < 22; i++) {
        await client.append({ sessionId: created.sessionId, entries: turn(i, 2100) });
        const paused = await client.turnEnded({ sessionId: created.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
        assert.equal(paused.autoCompaction?.outcome, "paused");
      }
      await waitFor(() => controller.status.text.endsWith("$(debug-pause)"), "the paused status");
      const view = controller.status;
      assert.equal(view.warning, true);
      assert.match(view.tooltip, /Automatic compaction paused: .*keepRecentTokens/);
      assert.equal(warnings.length, 1, "told once, however many turns follow");
      assert.match(warnings[0]!, /^Automatic compaction paused: .*larger context window/);

      // A manual compaction that frees enough lifts it.
      await client.updateSettings({
        sessionId: created.sessionId,
        settings: { compaction: { keepRecentTokens: 300 } },
      });
      await controller.compact(new ScriptedUi({ input: "" }));
      await waitFor(() => !controller.status.text.includes("debug-pause"), "the pause to be lifted");
    } finally {
      listening.dispose();
    }
  });

  it("comes back after the daemon dies, reopening the session", async () => {
    const client = await controller.ensureClient();
    const session = controller.session!;
    const down = nextEvent(controller.onDidChangeStatus, (v) => v.text.includes("debug-disconnect"));
    client.process!.kill("SIGKILL");
    const view = await down;
    assert.match(view.tooltip, /SIGKILL/);
    assert.ok(log.some((line) => line.startsWith("sessiond stopped:")));

    const again = await controller.ensureClient();
    assert.notEqual(again, client);
    assert.equal(controller.session?.path, session.path);
    assert.ok((await controller.treeModel()).length > 0, "the reopened session has its entries");
    assert.match(controller.status.text, /^\$\(history\) /);
  });

  it("asks for a session before commands that need one", async () => {
    const empty = new SessionController({ config: config(), cwd: box.dir, env: box.env });
    try {
      const ui = new ScriptedUi();
      assert.equal(await empty.compact(ui), undefined);
      assert.match(ui.infos[0] ?? "", /Open a session first/);
      assert.equal(await empty.undoCompaction(ui), undefined);
      assert.equal(await empty.showCovered(ui), undefined);
      assert.equal(ui.infos.length, 3);
      assert.ok(ui.infos.every((info) => /Open a session first/.test(info)));
      assert.deepEqual(await empty.treeModel(), []);
    } finally {
      await empty.dispose();
    }
  });
});

describe("SessionController on an agent's daemon (sessiond.socket)", () => {
  it("follows the session an agent writes, and leaves the daemon running", async () => {
    const box = createSandbox();
    const socket = join(box.dir, "run", "agent.sock");
    const daemon = await startListeningDaemon(daemonCommand("--socket", socket), { env: box.env });
    assert.equal(daemon.address, `unix ${socket}`);
    const agent = new SessiondClient();
    const controller = new SessionController({ config: config({ socket, command: ["/nonexistent"] }), cwd: box.dir });
    try {
      await agent.connect({ socket });
      await agent.initialize({ clientInfo: { name: "agent" }, settings: SMALL_COMPACTION_SETTINGS });
      const session = await filledSession(agent, box.dir, 3, 600, true);

      const opened = await controller.openSession(session.path);
      assert.equal(opened.sessionId, session.sessionId, "one daemon, one session");
      const redraw = nextEvent(controller.onDidChangeTree);
      await agent.append({ sessionId: session.sessionId, entries: turn(5, 2000) });
      await redraw;
      assert.equal((await controller.treeModel()).length, 8);

      const outcome = nextEvent(controller.onDidChangeStatus, (v) => /Compacted \(threshold\)/.test(v.tooltip));
      const result = await agent.turnEnded({ sessionId: session.sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
      assert.ok(result.compaction, "the agent's daemon compacted");
      await outcome;

      await controller.dispose();
      assert.equal((await agent.contextUsage({ sessionId: session.sessionId })).contextWindow > 0, true, "the agent carries on");
    } finally {
      await controller.dispose();
      await agent.dispose();
      await daemon.stop();
      box.cleanup();
    }
  });
});

describe("SessionController on a session pi itself writes", () => {
  it("redraws the tree as pi appends, with no extra work", async () => {
    const box = createSandbox();
    const controller = new SessionController({ config: config(), cwd: box.dir, env: box.env });
    try {
      const agent = await controller.ensureClient();
      const session = await filledSession(agent, box.dir, 2, 300, true);
      await controller.openSession(session.path);
      const before = (await controller.treeModel()).length;
      // pi 0.73.1's own SessionManager, from the parity tests' npm install: no lock taken.
      // It runs asynchronously so that the extension keeps handling the daemon's
      // notifications while pi starts, which takes seconds on a loaded machine.
      const written = await piAppends(session.path, 2);
      // Redraws come at the daemon's next look at the file; one may have come already,
      // so each short wait is followed by a fresh look at the tree.
      let rows = await controller.treeModel();
      const deadline = Date.now() + 20000;
      while (rows.length < before + 2 && Date.now() < deadline) {
        await nextEvent(controller.onDidChangeTree, () => true, 1000).catch(() => undefined);
        rows = await controller.treeModel();
      }
      assert.equal(rows.length, before + 2);
      assert.equal(rows.find((r) => r.leaf)?.id, written.at(-1), "the leaf is pi's last entry");
    } finally {
      await controller.dispose();
      box.cleanup();
    }
  });
});

/** Runs tests/parity/pi_append.mjs on `file`; the ids pi wrote, in order. */
async function piAppends(file: string, count: number): Promise<string[]> {
  const script = join(repoRoot, "tests", "parity", "pi_append.mjs");
  const { stdout } = await run(process.execPath, [script, file, String(count)], { encoding: "utf8" });
  return stdout
    .trim()
    .split("\n")
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

describe("SessionController with the editor's language model", () => {
  it("summarizes through the chat model when enabled", async () => {
    const box = createSandbox();
    const model = new ScriptedChatModel({ chunks: ["## Goal\nSummary by the editor's model."] });
    const controller = new SessionController({
      config: config({ llm: { enabled: true, vendor: "", family: "" } }),
      cwd: box.dir,
      env: box.env,
      chatModels: async () => model,
    });
    try {
      const client = await controller.ensureClient();
      const created = await filledSession(client, box.dir, 6, 1500, true);
      await controller.openSession(created.path);
      const result = await controller.compact(new ScriptedUi({ input: "" }));
      assert.match(String(result?.entry.summary), /Summary by the editor's model\./);
      assert.equal(model.requests.length >= 1, true);
    } finally {
      await controller.dispose();
      box.cleanup();
    }
  });
});
