import * as vscode from "vscode";
import type { SessionController } from "../core/controller.js";
import type { StatusView } from "../core/status.js";

/** Context usage and compaction progress, from the controller's status. */
export function createStatusBar(controller: SessionController): vscode.Disposable {
  const item = vscode.window.createStatusBarItem("sessiond.status", vscode.StatusBarAlignment.Left, 50);
  item.name = "sessiond context usage";
  item.command = "sessiond.compact";
  const show = (view: StatusView) => {
    item.text = view.text;
    item.tooltip = `${view.tooltip}\n\nClick to compact the session.`;
    item.backgroundColor = view.warning ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
    // Nothing to say until a session is open.
    if (controller.session) item.show();
    else item.hide();
  };
  show(controller.status);
  const subscriptions = [
    controller.onDidChangeStatus(show),
    controller.onDidChangeSession(() => show(controller.status)),
  ];
  return {
    dispose: () => {
      subscriptions.forEach((s) => s.dispose());
      item.dispose();
    },
  };
}
