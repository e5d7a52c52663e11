import * as vscode from "vscode";
import { normalizeConfig, type ExtensionConfig } from "../core/config.js";

export function readConfig(): ExtensionConfig {
  const c = vscode.workspace.getConfiguration("sessiond");
  return normalizeConfig({
    command: c.get<string[]>("command"),
    socket: c.get<string>("socket"),
    settings: c.get<Record<string, unknown>>("settings"),
    contextWindow: c.get<number>("contextWindow"),
    llm: {
      enabled: c.get<boolean>("llm.enabled"),
      vendor: c.get<string>("llm.vendor"),
      family: c.get<string>("llm.family"),
    },
  });
}
