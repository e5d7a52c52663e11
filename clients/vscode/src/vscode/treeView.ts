import * as vscode from "vscode";
import type { SessionController } from "../core/controller.js";
import { indexTree, type NodeKind, type TreeItemModel } from "../core/treeModel.js";

const ICONS: Record<NodeKind, string> = {
  user: "account",
  assistant: "hubot",
  toolResult: "tools",
  compaction: "fold",
  branchSummary: "git-merge",
  label: "tag",
  model: "symbol-enum",
  thinking: "lightbulb",
  custom: "extensions",
  other: "circle-small",
};

/** The session tree view over the controller's model; rebuilt on every `session/changed`. */
export class SessionTreeProvider implements vscode.TreeDataProvider<TreeItemModel>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };
  private parents = new Map<string, TreeItemModel | undefined>();
  private rows = new Map<string, TreeItemModel>();
  private readonly loaded = new vscode.EventEmitter<TreeItemModel | undefined>();
  /** The rows were read again; the leaf's row (if any) can now be revealed. */
  readonly onDidLoad = this.loaded.event;

  constructor(
    private readonly controller: SessionController,
    private readonly onError: (error: unknown) => void,
  ) {
    this.subscription = controller.onDidChangeTree(() => this.changed.fire());
  }

  refresh(): void {
    this.changed.fire();
  }

  async getChildren(element?: TreeItemModel): Promise<TreeItemModel[]> {
    if (element) return element.children;
    try {
      const rows = await this.controller.treeModel();
      const { parents, leaf, byId } = indexTree(rows);
      this.parents = parents;
      this.rows = byId;
      this.loaded.fire(leaf);
      return rows;
    } catch (error) {
      this.onError(error);
      return [];
    }
  }

  /** The row of an entry, as last read (undefined before the view was shown, or for a new entry). */
  row(id: string): TreeItemModel | undefined {
    return this.rows.get(id);
  }

  getParent(row: TreeItemModel): TreeItemModel | undefined {
    return this.parents.get(row.id);
  }

  getTreeItem(row: TreeItemModel): vscode.TreeItem {
    const state =
      row.children.length === 0
        ? vscode.TreeItemCollapsibleState.None
        : row.expanded
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(row.label, state);
    item.id = row.id;
    item.description = row.description;
    item.tooltip = row.tooltip;
    // The active path stands out; the rest of the tree is dimmed by its icon colour.
    item.iconPath = new vscode.ThemeIcon(
      row.leaf ? "debug-stackframe" : ICONS[row.kind],
      row.active ? new vscode.ThemeColor("charts.green") : new vscode.ThemeColor("disabledForeground"),
    );
    item.contextValue = `entry.${row.kind}${row.active ? ".active" : ""}`;
    return item;
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
    this.loaded.dispose();
  }
}
