import * as vscode from "vscode";
import { needsRestart } from "./core/config.js";
import { SessionController } from "./core/controller.js";
import { inert } from "./core/text.js";
import type { NavigateMode } from "./core/flows.js";
import type { TreeItemModel } from "./core/treeModel.js";
import { vscodeChatModels } from "./vscode/chatModel.js";
import { readConfig } from "./vscode/config.js";
import { createStatusBar } from "./vscode/statusBar.js";
import { SessionTreeProvider } from "./vscode/treeView.js";
import { vscodeUi } from "./vscode/ui.js";

let controller: SessionController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("sessiond", { log: true });
  let config = readConfig();
  const current = new SessionController({
    config,
    ...(vscode.workspace.workspaceFolders?.[0] ? { cwd: vscode.workspace.workspaceFolders[0].uri.fsPath } : {}),
    chatModels: vscodeChatModels(() => readConfig().llm),
    log: (line) => output.info(line),
    clientVersion: String(context.extension.packageJSON.version ?? ""),
  });
  controller = current;
  const fail = (error: unknown) => {
    output.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    void vscode.window.showErrorMessage(`sessiond: ${inert(error instanceof Error ? error.message : String(error))}`);
  };
  const tree = new SessionTreeProvider(current, fail);
  const view = vscode.window.createTreeView("sessiond.sessionTree", { treeDataProvider: tree, showCollapseAll: true });
  // A session is read from its leaf back; a long one would open scrolled to its first
  // entry, far from where the agent is. Scroll to the leaf whenever it moves, and only
  // then, so that a redraw does not take the user away from what they scrolled to.
  let revealedLeaf: string | undefined;
  const revealLeaf = tree.onDidLoad((leaf) => {
    if (!leaf || leaf.id === revealedLeaf) return;
    revealedLeaf = leaf.id;
    setTimeout(() => {
      view.reveal(leaf, { select: false, focus: false, expand: true }).then(undefined, (error: unknown) => {
        output.warn(`could not scroll to the leaf: ${String(error)}`);
      });
    }, 0);
  });

  const command = (id: string, run: (...args: never[]) => Promise<unknown>) =>
    vscode.commands.registerCommand(id, (...args: never[]) => run(...args).catch(fail));
  const navigateHere = (mode?: NavigateMode) => async (row?: TreeItemModel) => {
    const result = await current.navigate(vscodeUi, {
      ...(row ? { targetId: row.id } : {}),
      ...(mode ? { mode } : {}),
    });
    // Navigating to a user message hands its text back for editing, as pi's editor does.
    if (result?.editorText) {
      const document = await vscode.workspace.openTextDocument({ content: result.editorText, language: "markdown" });
      await vscode.window.showTextDocument(document, { preview: true });
    }
  };

  context.subscriptions.push(
    output,
    tree,
    view,
    revealLeaf,
    createStatusBar(current),
    current.onDidChangeSession((session) => {
      void vscode.commands.executeCommand("setContext", "sessiond.hasSession", session !== undefined);
      const shown = session?.name ?? (session ? session.path.split(/[\\/]/).pop() : undefined);
      view.description = shown !== undefined ? inert(shown) : undefined;
    }),
    command("sessiond.openSession", async (uri?: vscode.Uri) => {
      const opened = await current.pickAndOpen(vscodeUi, uri?.fsPath);
      // The view starts collapsed at the foot of the Explorer: without this, opening a
      // session changes nothing the user can see but the status bar.
      if (opened) await vscode.commands.executeCommand("sessiond.sessionTree.focus");
    }),
    command("sessiond.showSessionFile", async () => {
      if (current.session)
        await vscode.window.showTextDocument(vscode.Uri.file(current.session.path), { preview: true });
    }),
    command("sessiond.compact", () => current.compact(vscodeUi)),
    command("sessiond.undoCompaction", async (row?: TreeItemModel) => {
      await current.undoCompaction(vscodeUi, row?.kind === "compaction" ? row.id : undefined);
    }),
    command("sessiond.showCovered", async (row?: TreeItemModel) => {
      const entry = await current.showCovered(vscodeUi, row?.kind === "compaction" ? row.id : undefined);
      if (!entry) return;
      // The entry picked is shown where the session is shown: its row in the tree, which a
      // view shown for the first time reads only after it is focused.
      let loaded: vscode.Disposable | undefined;
      const read = new Promise<void>((resolve) => {
        loaded = tree.onDidLoad(() => resolve());
        setTimeout(resolve, 5000);
      });
      await vscode.commands.executeCommand("sessiond.sessionTree.focus");
      if (!tree.row(entry.id)) await read;
      loaded?.dispose();
      const shown = tree.row(entry.id);
      if (shown) await view.reveal(shown, { select: true, focus: true, expand: true });
    }),
    current.onDidWarn((message) => {
      void vscode.window.showWarningMessage(`sessiond: ${inert(message)}`);
    }),
    command("sessiond.navigate", () => navigateHere()()),
    command("sessiond.navigateHere", (row?: TreeItemModel) => navigateHere("plain")(row)),
    command("sessiond.navigateHereWithSummary", (row?: TreeItemModel) => navigateHere("summary")(row)),
    command("sessiond.refreshTree", async () => {
      tree.refresh();
      await current.refreshUsage();
    }),
    command("sessiond.restartDaemon", () => current.restart()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration("sessiond")) return;
      const next = readConfig();
      const restart = needsRestart(config, next);
      config = next;
      current.reconfigure(next, restart).catch(fail);
    }),
  );
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
