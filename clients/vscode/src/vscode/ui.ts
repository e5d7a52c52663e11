import * as vscode from "vscode";
import type { PickItem, Ui } from "../core/flows.js";

/** The flows' dialogs as VS Code quick picks, input boxes and notifications. */
export const vscodeUi: Ui = {
  async pick<T>(items: PickItem<T>[], options: { title: string; placeHolder?: string }) {
    const picked = await vscode.window.showQuickPick(
      items.map((item) => ({
        label: item.label,
        description: item.description,
        detail: item.detail,
        value: item.value,
      })),
      { title: options.title, placeHolder: options.placeHolder, matchOnDescription: true, matchOnDetail: true },
    );
    return picked?.value;
  },
  input(options) {
    return Promise.resolve(
      vscode.window.showInputBox({ title: options.title, prompt: options.prompt, placeHolder: options.placeHolder }),
    );
  },
  async pickFile(options) {
    const picked = await vscode.window.showOpenDialog({
      title: options.title,
      canSelectMany: false,
      filters: { "Session files": ["jsonl"] },
      ...(options.defaultDir ? { defaultUri: vscode.Uri.file(options.defaultDir) } : {}),
    });
    return picked?.[0]?.fsPath;
  },
  progress(title, run) {
    return Promise.resolve(
      vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: true },
        (_progress, token) => run(token),
      ),
    );
  },
  info(message) {
    void vscode.window.showInformationMessage(message);
  },
  error(message) {
    void vscode.window.showErrorMessage(message);
  },
};
