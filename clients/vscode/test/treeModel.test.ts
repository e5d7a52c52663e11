// Tree rows from session/tree: flattened chains, branches, the active path, compactions.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { SessiondClient, TreeNode, TreeResult } from "@sessiond/client";
import { buildTreeModel, flattenTree, indexTree, type TreeItemModel } from "../src/core/treeModel";
import { SMALL_CONTEXT_WINDOW, createSandbox, type Sandbox } from "@sessiond/client/testing";
import { filledSession, startClient, turn } from "./helpers";

function node(id: string, parentId: string | null, children: string[], extra: Partial<TreeNode> = {}): TreeNode {
  return {
    id,
    parentId,
    type: "message",
    role: "user",
    timestamp: "2026-01-02T03:04:05.678Z",
    children,
    preview: `user: text of ${id}`,
    active: false,
    ...extra,
  };
}

/** a - b, where the session branched: x1 - x2 left behind, y1 - y2 (the leaf) active. */
function branchedTree(leaf: Partial<TreeNode> = {}): TreeResult {
  return {
    rootIds: ["a"],
    leafId: "y2",
    nodes: [
      node("a", null, ["b"], { active: true }),
      node("b", "a", ["x1", "y1"], { active: true }),
      node("x1", "b", ["x2"]),
      node("x2", "x1", []),
      node("y1", "b", ["y2"], { active: true }),
      node("y2", "y1", [], { active: true, ...leaf }),
    ],
  };
}

describe("buildTreeModel (shapes)", () => {
  it("shows a linear session as a flat list, leaf marked", () => {
    const tree: TreeResult = {
      rootIds: ["a"],
      leafId: "c",
      nodes: [
        node("a", null, ["b"], { active: true }),
        node("b", "a", ["c"], { active: true, role: "assistant", preview: "assistant: hello   there" }),
        node("c", "b", ["d"], { active: true, label: "checkpoint" }),
        node("d", "c", [], { role: "toolResult", preview: "toolResult bash (error): exit 1" }),
      ],
    };
    const rows = buildTreeModel(tree);
    assert.deepEqual(
      rows.map((r) => r.id),
      ["a", "b", "c", "d"],
    );
    assert.ok(rows.every((r) => r.children.length === 0));
    assert.equal(rows[1]!.label, "hello there", "the role prefix goes, whitespace folds");
    assert.equal(rows[3]!.label, "bash (error): exit 1", "a tool result keeps its tool, not its role");
    assert.equal(rows[1]!.kind, "assistant");
    assert.equal(rows[2]!.leaf, true);
    assert.equal(rows[2]!.label, "[checkpoint] text of c", "a label leads, where a narrow view still shows it");
    assert.equal(rows[2]!.description, "← leaf");
    assert.match(rows[0]!.tooltip, /^message \(user\) a\n2026-01-02 03:04:05Z/);
  });

  it("nests only at branch points, opening the active branch", () => {
    const tree = branchedTree({
      type: "compaction",
      role: null,
      preview: "compaction (1,200 tokens before): summary",
    });
    const rows = buildTreeModel(tree);
    assert.deepEqual(
      rows.map((r) => r.id),
      ["a", "b"],
    );
    const point = rows[1]!;
    assert.equal(point.branchPoint, true);
    assert.deepEqual(
      point.children.map((r) => r.id),
      ["x1", "y1"],
    );
    const [left, right] = point.children;
    assert.deepEqual(
      left!.children.map((r) => r.id),
      ["x2"],
    );
    assert.equal(left!.expanded, false, "the branch left behind starts closed");
    assert.equal(right!.expanded, true);
    assert.equal(right!.children[0]!.kind, "compaction");
    assert.deepEqual(
      flattenTree(rows).map(({ row, depth }) => `${depth}:${row.id}`),
      ["0:a", "0:b", "1:x1", "2:x2", "1:y1", "2:y2"],
    );
  });

  it("knows every row's parent row and the leaf, for scrolling the view to the leaf", () => {
    const tree = branchedTree();
    const rows = buildTreeModel(tree);
    const { parents, leaf } = indexTree(rows);
    assert.equal(leaf?.id, "y2");
    // The chain from the leaf up through the rows the view nests it in, to a top row.
    const chain: string[] = [];
    for (let row: TreeItemModel | undefined = leaf; row; row = parents.get(row.id)) chain.push(row.id);
    assert.deepEqual(chain, ["y2", "y1", "b"]);
    assert.equal(parents.get("a"), undefined);
    assert.equal(parents.get("x2")?.id, "x1");
    assert.equal(parents.size, 6);
    assert.equal(indexTree([]).leaf, undefined);
  });

  it("shows several roots as branches and survives unknown types and missing previews", () => {
    const tree: TreeResult = {
      rootIds: ["r1", "r2", "gone"],
      leafId: null,
      nodes: [
        node("r1", null, ["ghost"], { type: "session_info", role: null, preview: null }),
        node("r2", null, [], { type: "mystery_type", role: null, preview: null }),
      ],
    };
    const rows = buildTreeModel(tree);
    assert.deepEqual(
      rows.map((r) => [r.id, r.kind, r.label]),
      [
        ["r1", "other", "session info"],
        ["r2", "other", "mystery type"],
      ],
    );
    assert.equal(rows[0]!.children.length, 0, "a child that is not in the nodes is skipped");
  });
});

describe("buildTreeModel (real daemon)", () => {
  let box: Sandbox;
  let client: SessiondClient;

  before(async () => {
    box = createSandbox();
    client = await startClient(box);
  });
  after(async () => {
    await client.dispose();
    box.cleanup();
  });

  it("models a branched, compacted session", async () => {
    const { sessionId, ids } = await filledSession(client, box.dir, 6, 2000);
    const compacted = await client.turnEnded({ sessionId, contextWindow: SMALL_CONTEXT_WINDOW });
    assert.ok(compacted.compaction, "a threshold compaction ran");
    await client.navigateTree({ sessionId, targetId: ids[3]! });
    const other = (await client.append({ sessionId, entries: turn(9, 300) })).ids;
    await client.label({ sessionId, targetId: other[0]!, label: "retry" });

    const rows = buildTreeModel(await client.tree({ sessionId }));
    assert.deepEqual(
      rows.map((r) => r.id),
      ids.slice(0, 4),
      "the shared prefix is flat",
    );
    const point = rows[3]!;
    assert.equal(point.branchPoint, true);
    const [oldBranch, newBranch] = point.children;
    assert.equal(oldBranch!.id, ids[4]);
    assert.equal(oldBranch!.active, false);
    assert.equal(oldBranch!.expanded, false);
    assert.ok(
      flattenTree([oldBranch!]).some(({ row }) => row.kind === "compaction"),
      "the compaction is on the old branch",
    );
    assert.equal(newBranch!.id, other[0]);
    assert.equal(newBranch!.active, true);
    assert.equal(newBranch!.expanded, true);
    assert.match(newBranch!.label, /^\[retry\] /);
    const leaf = flattenTree(rows).find(({ row }) => row.leaf)!.row;
    assert.equal(leaf.kind, "label", "the label entry is the leaf");
    assert.match(newBranch!.label, /^\[retry\] task 9/);
  });
});
