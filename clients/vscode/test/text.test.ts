// Text from a session file is inert wherever the extension shows it, and the settings that
// choose what the extension runs or connects to cannot come from a workspace.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import type { ListSessionsResult, TreeNode } from "@sessiond/client";
import { coveredFlow, pickSessionFlow, undoCompactionFlow, type Client } from "../src/core/flows";
import { renderStatus, reduceStatus, INITIAL_STATUS } from "../src/core/status";
import { inert, pickText } from "../src/core/text";
import { buildTreeModel } from "../src/core/treeModel";
import { ScriptedUi } from "./helpers";

// An OSC 52 clipboard write, a screen clear, a forged second line, a right-to-left override.
const HOSTILE = "fix\u001b]52;c;cHduZWQ=\u0007 it\u001b[2J\nsessiond: re-enter your key\u202egnp.exe";
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe("inert text", () => {
  it("spells every control, line-breaking and bidirectional character as an escape", () => {
    const shown = inert(HOSTILE);
    assert.doesNotMatch(shown, CONTROL);
    assert.equal(shown, "fix\\u001b]52;c;cHduZWQ=\\u0007 it\\u001b[2J\\nsessiond: re-enter your key\\u202egnp.exe");
    assert.equal(inert("plain text, ünïcode 😀"), "plain text, ünïcode 😀");
  });

  it("keeps a file's text from showing VS Code's icons in a quick pick", () => {
    assert.equal(pickText("$(check) done"), "$\u200b(check) done");
  });

  it("shows tree rows, their labels and tooltips inert", () => {
    const node: TreeNode = {
      id: "a\u001b[31m",
      parentId: null,
      type: "message",
      role: "user",
      timestamp: "2026-01-02T03:04:05.678Z",
      children: [],
      preview: `user: ${HOSTILE}`,
      label: "lbl\u001b]0;title\u0007",
      active: true,
    };
    const [row] = buildTreeModel({ rootIds: [node.id], leafId: node.id, nodes: [node] });
    assert.doesNotMatch(row!.label, CONTROL);
    assert.match(row!.label, /^\[lbl\\u001b\]0;title\\u0007\] fix\\u001b/);
    for (const line of row!.tooltip.split("\n")) assert.doesNotMatch(line, CONTROL);
  });

  it("lists sessions in the picker with inert names, first messages and paths", async () => {
    const sessions: ListSessionsResult["sessions"] = [
      {
        path: "/s/a\u001b[2J.jsonl",
        sessionId: "a",
        cwd: "/p",
        created: "2026-01-01T00:00:00.000Z",
        modified: "2026-01-01T00:00:00.000Z",
        entryCount: 2,
        firstMessage: HOSTILE,
      },
      {
        path: "/s/b.jsonl",
        sessionId: "b",
        cwd: "/p",
        created: "2026-01-01T00:00:00.000Z",
        modified: "2026-01-02T00:00:00.000Z\u001b[2J",
        entryCount: 2,
        firstMessage: "x",
        name: "$(warning) Sign in again\nnow",
      },
    ];
    const client = { listSessions: async () => ({ sessions }) } as unknown as Client;
    const ui = new ScriptedUi();
    await pickSessionFlow(client, ui, "/p");
    const shown = ui.picks.flatMap((pick) => pick.items);
    assert.ok(shown.length >= 2);
    for (const item of shown) {
      for (const text of [item.label, item.description ?? "", item.detail ?? ""]) {
        assert.doesNotMatch(text, CONTROL, text);
      }
    }
    assert.ok(shown.some((item) => item.label === "$\u200b(warning) Sign in again\\nnow"));
  });

  it("shows the entries a summary stands for, and the leaf an undo moved to, inert", async () => {
    const entry = {
      type: "message",
      id: "u1\u001b[2J",
      parentId: null,
      timestamp: "2026-01-01T00:00:00.000Z\u202e",
      message: { role: "user", content: [{ type: "text", text: `$(key) ${HOSTILE}` }] },
    };
    const compaction = { id: "c1\u0007", type: "compaction", parentId: null, children: [] };
    const client = {
      tree: async () => ({ leafId: compaction.id, rootIds: [compaction.id], nodes: [compaction] }),
      coveredByCompaction: async () => ({
        entryId: compaction.id,
        firstKeptEntryId: "k",
        entryIds: [entry.id],
        total: 1,
        previousCompactionId: "p\u001b]0;x\u0007",
      }),
      entries: async () => ({ entries: [entry], total: 1 }),
      entry: async () => ({ entry }),
      undoCompaction: async () => ({
        undoneEntryId: compaction.id,
        markerId: "m",
        copiedIds: [],
        copiedFrom: [],
        skippedIds: [],
        leafId: entry.id,
      }),
    } as unknown as Client;
    const ui = new ScriptedUi();
    await coveredFlow(client, "s", ui);
    const [pick] = ui.picks;
    assert.ok(pick && pick.items.length === 2);
    for (const text of [pick.title, ...pick.items.flatMap((i) => [i.label, i.description ?? "", i.detail ?? ""])]) {
      assert.doesNotMatch(text, CONTROL, text);
    }
    assert.match(pick.items[0]!.label, /^user: \$\u200b\(key\) fix\\u001b/);
    await undoCompactionFlow(client, "s", ui);
    assert.equal(ui.infos.length, 1);
    assert.doesNotMatch(ui.infos[0]!, CONTROL);
    assert.match(ui.infos[0]!, /The leaf is now user: \$\u200b\(key\) fix.* \(u1\\u001b\[2J\)\./);
  });

  it("shows the session's name and the daemon's outcomes inert in the status bar", () => {
    let state = reduceStatus(INITIAL_STATUS, { type: "connected" });
    state = reduceStatus(state, { type: "session", name: HOSTILE });
    const view = renderStatus(state);
    for (const line of view.tooltip.split("\n")) assert.doesNotMatch(line, CONTROL);
  });
});

describe("settings that choose what runs", () => {
  it("are machine-scoped: a workspace's settings cannot set them", () => {
    const manifest = JSON.parse(readFileSync(resolve(__dirname, "..", "..", "package.json"), "utf8"));
    const properties = manifest.contributes.configuration.properties;
    for (const name of ["sessiond.command", "sessiond.socket"]) {
      assert.equal(properties[name].scope, "machine", name);
    }
  });
});
