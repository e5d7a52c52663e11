import {
  isSessiondError,
  type CancellationToken,
  type Entry,
  type NavigateResult,
  type ListSessionsResult,
  type RunCompactionResult,
  type SessionMethods,
  type UndoCompactionResult,
  type WorkDoneProgress,
} from "@sessiond/client";
import { entryKind, entryPreview } from "./entries.js";
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

export type Client = Pick<
  SessionMethods,
  | "runCompaction"
  | "navigateTree"
  | "tree"
  | "listSessions"
  | "undoCompaction"
  | "coveredByCompaction"
  | "entries"
  | "entry"
>;

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

/**
 * "Undo the last compaction": `compaction/undo` of the context's newest compaction (or of
 * `entryId`, which must be that one: the user undoes what they were shown). Says what it
 * did, or that there was nothing to undo. Returns the result, or undefined.
 */
export async function undoCompactionFlow(
  client: Client,
  sessionId: string,
  ui: Ui,
  entryId?: string,
): Promise<UndoCompactionResult | undefined> {
  let result: UndoCompactionResult;
  try {
    result = await client.undoCompaction({ sessionId, ...(entryId ? { entryId } : {}) });
  } catch (error) {
    report(ui, error, {
      nothingToUndo: "Nothing to undo: the context has no compaction.",
      conflict: "That compaction is not the newest one of the context any more; nothing was undone.",
      busy: "Another operation is running on this session; try again when it ends.",
    });
    return undefined;
  }
  // The leaf is the last copy, or the compaction's parent when nothing followed it.
  const leaf = (await client.entry({ sessionId, entryId: result.leafId }).catch(() => undefined))?.entry;
  const where = leaf ? `${pickText(entryPreview(leaf, 60))} (${inert(result.leafId)})` : inert(result.leafId);
  const copied = result.copiedIds.length;
  ui.info(
    `Compaction undone: the context is the one before it again${copied ? `, with the ${copied} ${copied === 1 ? "entry" : "entries"} after it copied back` : ""}. ` +
      `The leaf is now ${where}. The compaction stays on the branch left behind (Navigate To… goes back to it).`,
  );
  return result;
}

/** One entry a compaction's summary stands for, or the way to the previous summary's. */
type CoveredPick = { entry: Entry } | { previous: string };

/** Ids asked for per `compaction/covered` page, and so entries per `session/entries` request. */
const COVERED_PAGE = 1000;

/**
 * "What does this summary stand for": the entries the compaction `entryId` (default: the
 * newest on the current path) replaced in the context, in a pick, oldest first. A summary
 * that updated a previous one offers that one's entries too. Returns the entry picked.
 */
export async function coveredFlow(
  client: Client,
  sessionId: string,
  ui: Ui,
  entryId?: string,
  pageSize = COVERED_PAGE,
): Promise<Entry | undefined> {
  const newest = entryId ?? (await latestCompaction(client, sessionId));
  if (!newest) {
    ui.info("The context has no compaction yet.");
    return undefined;
  }
  let compactionId: string = newest;
  try {
    for (;;) {
      const { entries, previousCompactionId } = await readCovered(client, sessionId, compactionId, pageSize);
      const items: PickItem<CoveredPick>[] = entries.map((entry) => ({
        label: pickText(entryPreview(entry)),
        description: pickText(`${entryKind(entry)} · ${entry.id}`),
        detail: pickText(entry.timestamp.replace("T", " ").replace(/\.\d+Z$/, "Z")),
        value: { entry },
      }));
      if (previousCompactionId) {
        items.push({
          label: "$(history) What the previous summary stood for…",
          description: pickText(`compaction · ${previousCompactionId}`),
          value: { previous: previousCompactionId },
        });
      }
      const picked: CoveredPick | undefined = await ui.pick(items, {
        title: `What the summary ${inert(compactionId)} stands for: ${entries.length} ${entries.length === 1 ? "entry" : "entries"}`,
        placeHolder: "The entries it replaced in the context, oldest first (pick one to show it in the tree)",
      });
      if (!picked) return undefined;
      if ("entry" in picked) return picked.entry;
      compactionId = picked.previous;
    }
  } catch (error) {
    report(ui, error, { notFound: "That compaction is not in the session." });
    return undefined;
  }
}

/** The ids `compaction/covered` names, page after page, and their entries. */
async function readCovered(
  client: Client,
  sessionId: string,
  entryId: string,
  pageSize: number,
): Promise<{ entries: Entry[]; previousCompactionId?: string }> {
  const entries: Entry[] = [];
  let previousCompactionId: string | undefined;
  let offset: number | undefined = 0;
  while (offset !== undefined) {
    const page = await client.coveredByCompaction({ sessionId, entryId, offset, limit: pageSize });
    previousCompactionId = page.previousCompactionId ?? undefined;
    if (page.entryIds.length > 0) entries.push(...(await client.entries({ sessionId, ids: page.entryIds })).entries);
    // A next page must start further on, or a damaged answer would loop for ever.
    offset = page.nextOffset != null && page.nextOffset > offset ? page.nextOffset : undefined;
  }
  return { entries, ...(previousCompactionId ? { previousCompactionId } : {}) };
}

/** The newest compaction on the path from the root to the leaf, if any. */
async function latestCompaction(client: Client, sessionId: string): Promise<string | undefined> {
  const tree = await client.tree({ sessionId, previews: false });
  const byId = new Map(tree.nodes.map((node) => [node.id, node]));
  const seen = new Set<string>();
  for (let id = tree.leafId; id && !seen.has(id); id = byId.get(id)?.parentId ?? null) {
    seen.add(id);
    if (byId.get(id)?.type === "compaction") return id;
  }
  return undefined;
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
