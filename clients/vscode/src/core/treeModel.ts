import type { TreeNode, TreeResult } from "@sessiond/client";
import { inert } from "./text.js";

/** What an entry is, for its icon. */
export type NodeKind =
  | "user"
  | "assistant"
  | "toolResult"
  | "compaction"
  | "branchSummary"
  | "label"
  | "model"
  | "thinking"
  | "custom"
  | "other";

/** One row of the session tree view, free of any VS Code type. */
export interface TreeItemModel {
  /** The entry id: stable across refreshes, so expansion state survives them. */
  id: string;
  kind: NodeKind;
  label: string;
  description: string;
  tooltip: string;
  /** On the path from the root to the leaf. */
  active: boolean;
  /** The current leaf. */
  leaf: boolean;
  /** Where the session branches: its children are the branches. */
  branchPoint: boolean;
  children: TreeItemModel[];
  /** Branches on the active path open, the others closed. */
  expanded: boolean;
}

/**
 * The session tree as rows. A chain of single children is shown flat, as pi's tree does:
 * nesting starts only where the session branches, so a long linear session is a list
 * and each branch is one expandable row holding its own chain.
 */
export function buildTreeModel(tree: TreeResult): TreeItemModel[] {
  const byId = new Map(tree.nodes.map((node) => [node.id, node]));
  const item = (node: TreeNode): TreeItemModel => describe(node, tree.leafId);

  const chain = (startId: string): TreeItemModel[] => {
    const rows: TreeItemModel[] = [];
    let node = byId.get(startId);
    while (node) {
      const row = item(node);
      rows.push(row);
      const children = node.children.filter((id) => byId.has(id));
      if (children.length === 1) {
        node = byId.get(children[0]!);
        continue;
      }
      if (children.length > 1) {
        row.branchPoint = true;
        row.children = children.map(branch);
        row.expanded = true;
      }
      break;
    }
    return rows;
  };

  const branch = (startId: string): TreeItemModel => {
    const [head, ...rest] = chain(startId);
    if (rest.length > 0) head!.children = rest;
    head!.expanded = head!.active && head!.children.length > 0;
    return head!;
  };

  const roots = tree.rootIds.filter((id) => byId.has(id));
  if (roots.length === 1) return chain(roots[0]!);
  return roots.map(branch);
}

/**
 * Each row's parent row (roots have none) and the leaf's row: what a tree view needs to
 * scroll to the leaf, since it asks for the parents of the row it reveals.
 */
export function indexTree(rows: TreeItemModel[]): {
  parents: Map<string, TreeItemModel | undefined>;
  leaf: TreeItemModel | undefined;
  /** Every row by its entry id (to reveal an entry a command names). */
  byId: Map<string, TreeItemModel>;
} {
  const parents = new Map<string, TreeItemModel | undefined>();
  const byId = new Map<string, TreeItemModel>();
  let leaf: TreeItemModel | undefined;
  const stack: [TreeItemModel, TreeItemModel | undefined][] = rows.map((row) => [row, undefined]);
  while (stack.length > 0) {
    const [row, parent] = stack.pop()!;
    parents.set(row.id, parent);
    byId.set(row.id, row);
    if (row.leaf) leaf = row;
    for (const child of row.children) stack.push([child, row]);
  }
  return { parents, leaf, byId };
}

/** Every row in display order (depth first), e.g. for a quick pick. */
export function flattenTree(rows: TreeItemModel[], depth = 0): { row: TreeItemModel; depth: number }[] {
  return rows.flatMap((row) => [{ row, depth }, ...flattenTree(row.children, depth + 1)]);
}

function describe(node: TreeNode, leafId: string | null): TreeItemModel {
  const kind = kindOf(node);
  // A label goes before the text: the text is long and the view cuts a row at its
  // width, so anything after it (the description) is rarely seen in a side bar.
  const label = `${node.label ? `[${inert(node.label)}] ` : ""}${labelOf(node, kind)}`;
  const time = node.timestamp.replace("T", " ").replace(/\.\d+Z$/, "Z");
  return {
    id: node.id,
    kind,
    label,
    description: node.id === leafId ? "← leaf" : "",
    tooltip: [`${node.type}${node.role ? ` (${node.role})` : ""} ${node.id}`, time, node.preview ?? ""]
      .filter(Boolean)
      .map(inert)
      .join("\n"),
    active: node.active ?? false,
    leaf: node.id === leafId,
    branchPoint: false,
    children: [],
    expanded: false,
  };
}

function kindOf(node: TreeNode): NodeKind {
  switch (node.type) {
    case "message":
      return node.role === "user" || node.role === "assistant" || node.role === "toolResult" ? node.role : "other";
    case "compaction":
      return "compaction";
    case "branch_summary":
      return "branchSummary";
    case "label":
      return "label";
    case "model_change":
      return "model";
    case "thinking_level_change":
      return "thinking";
    case "custom":
    case "custom_message":
      return "custom";
    default:
      return "other";
  }
}

const MAX_LABEL = 80;

function labelOf(node: TreeNode, kind: NodeKind): string {
  let text = node.preview ?? "";
  // The daemon's previews start with the role ("user: ..."); the icon already says it.
  // A tool result's preview names the tool after the role ("toolResult read: ..."):
  // the role goes, the tool stays.
  if (node.role && text.startsWith(`${node.role}: `)) text = text.slice(node.role.length + 2);
  else if (node.role === "toolResult" && text.startsWith("toolResult ")) text = text.slice("toolResult ".length);
  text = text.replace(/\s+/g, " ").trim();
  if (!text) text = kind === "other" ? node.type.replace(/_/g, " ") : kind;
  text = inert(text);
  return text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text;
}
