import {
  isSessiondError,
  type CancellationToken,
  type NavigateResult,
  type ListSessionsResult,
  type RunCompactionResult,
  type SessionMethods,
  type WorkDoneProgress,
} from "@sessiond/client";
import { formatTokens } from "./status.js";
import { inert, pickText } from "./text.js";
import { buildTreeModel, flattenTree } from "./treeModel.js";

export interface PickItem<T> {
  label: string;
  description?: string;
  detail?: string;
  value: T;
}

/**
 * The dialogs a command needs. The extension implements it with quick picks and input
 * boxes; tests script it. `undefined` always means the user dismissed the dialog.
 */
export interface Ui {
  pick<T>(items: PickItem<T>[], options: { title: string; placeHolder?: string }): Promise<T | undefined>;
  input(options: { title: string; prompt: string; placeHolder?: string }): Promise<string | undefined>;
  pickFile(options: { title: string; defaultDir?: string }): Promise<string | undefined>;
  /** Runs a long request under a cancellable progress indicator. */
  progress<T>(title: string, run: (token: CancellationToken) => Promise<T>): Promise<T>;
  info(message: string): void;
  error(message: string): void;
}

export type Client = Pick<SessionMethods, "runCompaction" | "navigateTree" | "tree" | "listSessions">;

export interface FlowOptions {
  onProgress?: (value: WorkDoneProgress) => void;
  /** Context window for the usage the daemon computes (undefined: its default). */
  contextWindow?: number;
}

/**
 * "Compact the session": optional instructions, then `compaction/run`. Returns the result,
 * or undefined when the user dismissed the dialog or there was nothing to do (said in `ui`).
 */
export async function compactFlow(
  client: Client,
  sessionId: string,
  ui: Ui,
  options: FlowOptions = {},
): Promise<RunCompactionResult | undefined> {
  const instructions = await ui.input({
    title: "Compact the session",
    prompt: "Instructions for the summary (optional): what to keep, what to focus on",
    placeHolder: "e.g. keep the decisions about the database schema",
  });
  if (instructions === undefined) return undefined;
  try {
    const result = await ui.progress("Compacting the session", (token) =>
      client.runCompaction(
        { sessionId, ...(instructions.trim() ? { customInstructions: instructions.trim() } : {}) },
        callOptions(options, token),
      ),
    );
    ui.info(
      `Compacted: ${formatTokens(result.tokensBefore)} → ${formatTokens(result.tokensAfter)} tokens${result.fromExtension ? " (summary from a hook)" : ""}.`,
    );
    return result;
  } catch (error) {
    report(ui, error, {
      nothingToCompact: "Nothing to compact yet.",
      alreadyCompacted: "The session was just compacted.",
      cancelled: "Compaction cancelled.",
      busy: "Another operation is running on this session; try again when it ends.",
    });
    return undefined;
  }
}

export type NavigateMode = "plain" | "summary" | "instructions";

/**
 * "Navigate the tree": pick a node (unless given), pick how, navigate. Returns the result
 * (its `editorText` is the user message to put back in the prompt), or undefined.
 */
export async function navigateFlow(
  client: Client,
  sessionId: string,
  ui: Ui,
  target?: { targetId?: string; mode?: NavigateMode },
  options: FlowOptions = {},
): Promise<NavigateResult | undefined> {
  let targetId = target?.targetId;
  if (!targetId) {
    const rows = flattenTree(buildTreeModel(await client.tree({ sessionId })));
    targetId = await ui.pick(
      rows.map(({ row, depth }) => ({
        label: `${"  ".repeat(depth)}${row.active ? "●" : "○"} ${pickText(row.label)}`,
        description: row.description,
        value: row.id,
      })),
      { title: "Navigate to…", placeHolder: "The entry to continue from (● on the current path)" },
    );
    if (!targetId) return undefined;
  }
  const mode =
    target?.mode ??
    (await ui.pick<NavigateMode>(
      [
        { label: "Navigate", description: "leave the current branch as it is", value: "plain" },
        { label: "Navigate and summarize", description: "add a summary of the branch left behind", value: "summary" },
        { label: "Navigate and summarize with instructions…", value: "instructions" },
      ],
      { title: "Navigate" },
    ));
  if (!mode) return undefined;
  let customInstructions: string | undefined;
  if (mode === "instructions") {
    customInstructions = await ui.input({
      title: "Summarize the branch",
      prompt: "Instructions for the branch summary",
    });
    if (customInstructions === undefined) return undefined;
  }
  try {
    const result = await ui.progress(mode === "plain" ? "Navigating" : "Summarizing the branch", (token) =>
      client.navigateTree(
        {
          sessionId,
          targetId,
          summarize: mode !== "plain",
          ...(customInstructions?.trim() ? { customInstructions: customInstructions.trim() } : {}),
          ...(options.contextWindow ? { contextWindow: options.contextWindow } : {}),
        },
        callOptions(options, token),
      ),
    );
    if (result.cancelled) ui.info(result.aborted ? "Navigation aborted." : "Navigation cancelled by a hook.");
    return result;
  } catch (error) {
    report(ui, error, {
      cancelled: "Navigation cancelled.",
      busy: "Another operation is running on this session; try again when it ends.",
    });
    return undefined;
  }
}

/** "Open a session": the project's sessions, newest first, or a file of the user's choice. */
export async function pickSessionFlow(client: Client, ui: Ui, cwd: string | undefined): Promise<string | undefined> {
  const BROWSE = "\u0000browse";
  let sessions: ListSessionsResult["sessions"] = [];
  if (cwd) {
    try {
      sessions = (await client.listSessions({ cwd })).sessions;
    } catch (error) {
      report(ui, error, {});
    }
  }
  sessions.sort((a, b) => b.modified.localeCompare(a.modified));
  const picked = await ui.pick<string>(
    [
      ...sessions.map((s) => ({
        label: pickText(s.name ?? (s.firstMessage || "(no messages)")),
        description: pickText(`${s.entryCount} entries · ${s.modified.slice(0, 16).replace("T", " ")}`),
        detail: pickText(s.path),
        value: s.path,
      })),
      { label: "$(folder-opened) Browse for a session file…", value: BROWSE },
    ],
    {
      title: "Open a session",
      placeHolder: sessions.length ? "Sessions of this workspace" : "No sessions found for this workspace",
    },
  );
  if (picked !== BROWSE) return picked;
  return ui.pickFile({ title: "Open a session file (.jsonl)" });
}

function callOptions(options: FlowOptions, token: CancellationToken) {
  return { token, ...(options.onProgress ? { onProgress: options.onProgress } : {}) };
}

/** Expected refusals are information; anything else is an error. */
function report(ui: Ui, error: unknown, expected: Partial<Record<string, string>>): void {
  if (isSessiondError(error) && expected[error.kind] !== undefined) {
    ui.info(expected[error.kind]!);
    return;
  }
  ui.error(`sessiond: ${inert(error instanceof Error ? error.message : String(error))}`);
}
