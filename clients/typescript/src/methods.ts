import type { CancellationToken } from "vscode-jsonrpc/node";
import type {
  AppendParams,
  AppendResult,
  BuildContextParams,
  BuildContextResult,
  EntriesParams,
  EntriesResult,
  EntryResult,
  MethodName,
  Methods,
  NavigateResult,
  PathResult,
  RunCompactionResult,
} from "./generated/protocol.js";
import type { WorkDoneProgress } from "./types.js";

export type MethodParams<M extends MethodName> = Methods[M]["params"];
export type MethodResult<M extends MethodName> = Methods[M]["result"];

/** Per call: cancellation and `$/progress` for this request. */
export interface CallOptions {
  /** Cancelling it sends `$/cancelRequest`; the call then rejects with kind `cancelled`. */
  token?: CancellationToken;
  /** The same as `token`, for code that speaks AbortController. */
  signal?: AbortSignal;
  /** Receives this request's `$/progress` values (the client adds a `workDoneToken`). */
  onProgress?: (value: WorkDoneProgress) => void;
}

type P<M extends MethodName> = MethodParams<M>;
type R<M extends MethodName> = Promise<MethodResult<M>>;

/** One typed method per request of the protocol (see protocol/schema.json for the fields). */
export abstract class SessionMethods {
  abstract request<M extends MethodName>(
    method: M,
    params: MethodParams<M>,
    options?: CallOptions,
  ): Promise<MethodResult<M>>;

  /** `session/new`: a session for `cwd` (its file is written lazily, as pi does, unless `writeNow`). */
  newSession(params: P<"session/new">, options?: CallOptions): R<"session/new"> {
    return this.request("session/new", params, options);
  }
  /** `session/open`: open (and subscribe to) an existing session file. */
  openSession(params: P<"session/open">, options?: CallOptions): R<"session/open"> {
    return this.request("session/open", params, options);
  }
  /** `session/list`: the sessions of a project (`cwd`) or a directory. */
  listSessions(params: P<"session/list">, options?: CallOptions): R<"session/list"> {
    return this.request("session/list", params, options);
  }
  /** `session/close`: this client stops following the session. */
  closeSession(params: P<"session/close">, options?: CallOptions): R<"session/close"> {
    return this.request("session/close", params, options);
  }
  /** `session/append`: entries under the leaf, in order; `expectedLeafId` guards against races. */
  append(params: AppendParams, options?: CallOptions): Promise<AppendResult> {
    return this.request("session/append", params, options);
  }
  /** `session/entries`: a page of entries in file order, or the entries with `ids`. */
  entries(params: EntriesParams, options?: CallOptions): Promise<EntriesResult> {
    return this.request("session/entries", params, options);
  }
  /** `session/entry`: one entry by id. */
  entry(params: P<"session/entry">, options?: CallOptions): Promise<EntryResult> {
    return this.request("session/entry", params, options);
  }
  /** `session/path`: the entries from the root to the leaf (or to `fromId`). */
  path(params: P<"session/path">, options?: CallOptions): Promise<PathResult> {
    return this.request("session/path", params, options);
  }
  /** `session/tree`: every node with its children, labels and whether it is on the active path. */
  tree(params: P<"session/tree">, options?: CallOptions): R<"session/tree"> {
    return this.request("session/tree", params, options);
  }
  /** `session/label`: set (or, without `label`, clear) the label of an entry. */
  label(params: P<"session/label">, options?: CallOptions): R<"session/label"> {
    return this.request("session/label", params, options);
  }
  /** `session/setName`: the session's display name. */
  setName(params: P<"session/setName">, options?: CallOptions): R<"session/setName"> {
    return this.request("session/setName", params, options);
  }
  /** `session/fork`: a new session file holding the path before a user message. */
  fork(params: P<"session/fork">, options?: CallOptions): R<"session/fork"> {
    return this.request("session/fork", params, options);
  }
  /** `session/userMessages`: the user messages one can fork at. */
  userMessages(params: P<"session/userMessages">, options?: CallOptions): R<"session/userMessages"> {
    return this.request("session/userMessages", params, options);
  }
  /** `context/build`: the messages to send to the model at the leaf (`format: "llm"` converts them). */
  buildContext(params: BuildContextParams, options?: CallOptions): Promise<BuildContextResult> {
    return this.request("context/build", params, options);
  }
  /** `context/usage`: how full the context is, and whether it should be compacted. */
  contextUsage(params: P<"context/usage">, options?: CallOptions): R<"context/usage"> {
    return this.request("context/usage", params, options);
  }
  /** `agent/turnEnded`: pi's end-of-turn checks; may compact and ask for a retry or a continue. */
  turnEnded(params: P<"agent/turnEnded">, options?: CallOptions): R<"agent/turnEnded"> {
    return this.request("agent/turnEnded", params, options);
  }
  /** `compaction/prepare`: what a compaction would summarize and keep, without running it. */
  prepareCompaction(params: P<"compaction/prepare">, options?: CallOptions): R<"compaction/prepare"> {
    return this.request("compaction/prepare", params, options);
  }
  /** `compaction/run`: compact now (`summary` commits a reviewed one); reports `$/progress`. */
  runCompaction(params: P<"compaction/run">, options?: CallOptions): Promise<RunCompactionResult> {
    return this.request("compaction/run", params, options);
  }
  /** `compaction/abort`: stop a running compaction of the session. */
  abortCompaction(params: P<"compaction/abort">, options?: CallOptions): R<"compaction/abort"> {
    return this.request("compaction/abort", params, options);
  }
  /** `compaction/undo`: take the context's newest compaction back (appends; deletes nothing). */
  undoCompaction(params: P<"compaction/undo">, options?: CallOptions): R<"compaction/undo"> {
    return this.request("compaction/undo", params, options);
  }
  /** `compaction/covered`: a page of the ids of the entries a compaction's summary stands for. */
  coveredByCompaction(
    params: P<"compaction/covered">,
    options?: CallOptions,
  ): R<"compaction/covered"> {
    return this.request("compaction/covered", params, options);
  }
  /** `tree/navigate`: move the leaf, optionally summarizing the branch left behind. */
  navigateTree(params: P<"tree/navigate">, options?: CallOptions): Promise<NavigateResult> {
    return this.request("tree/navigate", params, options);
  }
  /** `tree/abort`: stop a running branch summary. */
  abortTree(params: P<"tree/abort">, options?: CallOptions): R<"tree/abort"> {
    return this.request("tree/abort", params, options);
  }
  /** `settings/get`: the effective settings, global or for a session. */
  getSettings(params: P<"settings/get"> = {}, options?: CallOptions): R<"settings/get"> {
    return this.request("settings/get", params, options);
  }
  /** `settings/update`: overrides for this connection, or for one session. */
  updateSettings(params: P<"settings/update">, options?: CallOptions): R<"settings/update"> {
    return this.request("settings/update", params, options);
  }
  /** `shutdown`: the daemon flushes every session; only `exit` may follow (see `dispose`). */
  shutdown(options?: CallOptions): R<"shutdown"> {
    return this.request("shutdown", {}, options);
  }
}

/**
 * The typed method serving each request. Written as a full Record so that a method added
 * to the schema fails the build here until it has a wrapper.
 */
export const METHOD_WRAPPERS = {
  initialize: "initialize",
  shutdown: "shutdown",
  "session/new": "newSession",
  "session/open": "openSession",
  "session/list": "listSessions",
  "session/close": "closeSession",
  "session/append": "append",
  "session/entries": "entries",
  "session/entry": "entry",
  "session/path": "path",
  "session/tree": "tree",
  "session/label": "label",
  "session/setName": "setName",
  "session/fork": "fork",
  "session/userMessages": "userMessages",
  "context/build": "buildContext",
  "context/usage": "contextUsage",
  "agent/turnEnded": "turnEnded",
  "compaction/prepare": "prepareCompaction",
  "compaction/run": "runCompaction",
  "compaction/abort": "abortCompaction",
  "compaction/undo": "undoCompaction",
  "compaction/covered": "coveredByCompaction",
  "tree/navigate": "navigateTree",
  "tree/abort": "abortTree",
  "settings/get": "getSettings",
  "settings/update": "updateSettings",
} as const satisfies Record<MethodName, keyof SessionMethods | "initialize">;
