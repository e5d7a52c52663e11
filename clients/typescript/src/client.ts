import type { ChildProcess } from "node:child_process";
import {
  CancellationTokenSource,
  Emitter,
  ResponseError,
  createMessageConnection,
  type CancellationToken,
  type Disposable,
  type Event,
  type Logger,
  type MessageConnection,
} from "vscode-jsonrpc/node";
import { SessiondError, toSessiondError, ErrorCode } from "./errors.js";
import {
  PROTOCOL_VERSION,
  SERVER_NOTIFICATION_NAMES,
  type BeforeCompactHookParams,
  type BeforeCompactHookResult,
  type BeforeTreeHookParams,
  type BeforeTreeHookResult,
  type ClientInfo,
  type CompactHookParams,
  type CompactingHookParams,
  type CompactingHookResult,
  type CompactionEndedNotification,
  type CompactionStartedNotification,
  type InitializeResult,
  type LlmCompleteParams,
  type LlmCompleteResult,
  type LogMessageParams,
  type MethodName,
  type ProgressParams,
  type ServerNotifications,
  type ServerRequests,
  type SessionChanged,
  type SessionRecovered,
  type TreeHookParams,
} from "./generated/protocol.js";
import { HOOKS, type HookName } from "./hooks.js";
import { connectLink, spawnLink, type ConnectOptions, type Link, type SpawnOptions } from "./transport.js";
import type { ProgressToken, WorkDoneProgress } from "./types.js";
import { SessionMethods, type CallOptions, type MethodParams, type MethodResult } from "./methods.js";

export interface InitializeOptions {
  clientInfo?: ClientInfo;
  /** Setting overrides for this connection, `{group: {key: value}}`. */
  settings?: Record<string, unknown>;
  /** Notification methods this client does not want. */
  optOutNotifications?: string[];
  /** TCP only; defaults to the token given to `connect`. */
  authToken?: string;
  /**
   * Declare `window.workDoneProgress` and accept the daemon's progress tokens
   * (`window/workDoneProgress/create`): a summary written in the background is then
   * reported through `onProgress`, on the token its `compaction/started` names
   * (`progressToken`).
   */
  backgroundProgress?: boolean;
}

export interface ClientOptions {
  /** vscode-jsonrpc's logger, for its own complaints (default: silent). */
  logger?: Logger;
  /** How long `dispose` waits for `shutdown` and then for the daemon to go. */
  shutdownTimeoutMs?: number;
  /**
   * How long a cancelled request may stay unanswered before it rejects anyway. The daemon
   * answers every cancelled request with -32800; this bounds the wait when it cannot (a
   * daemon older than that rule, or one stuck in a handler).
   */
  cancelGraceMs?: number;
}

/** Why the link to the daemon ended. */
export interface CloseEvent {
  reason: string;
  /** Whether `dispose()` asked for it. */
  expected: boolean;
}

/** A hook handler: return nothing (or `{}`) to leave the daemon's behaviour alone. */
export type HookHandler<P, R> = (
  params: P,
  token: CancellationToken,
) => R | undefined | void | Promise<R | undefined | void>;
export type LlmCompleteHandler = (
  params: LlmCompleteParams,
  token: CancellationToken,
) => string | LlmCompleteResult | Promise<string | LlmCompleteResult>;

type State = "new" | "connected" | "initialized" | "closed";

const silentLogger: Logger = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  log: () => undefined,
};

/**
 * A connection to one sessiond daemon: lifecycle, one typed method per request
 * (inherited from SessionMethods), notifications as events, and hooks.
 *
 *     const client = new SessiondClient();
 *     await client.start();
 *     await client.initialize({ clientInfo: { name: "my-agent" } });
 *     const { sessionId } = await client.newSession({ cwd: process.cwd() });
 */
export class SessiondClient extends SessionMethods implements Disposable {
  private state: State = "new";
  private link: Link | undefined;
  private connection: MessageConnection | undefined;
  private authToken: string | undefined;
  private closeReason: string | undefined;
  private disposing: Promise<void> | undefined;
  private nextProgressToken = 1;
  private readonly progressListeners = new Map<ProgressToken, (value: WorkDoneProgress) => void>();
  private readonly hookHandlers = new Map<string, (params: never, token: CancellationToken) => unknown>();
  private readonly declaredHooks = new Set<HookName>();
  private llmHandler: LlmCompleteHandler | undefined;
  private readonly options: Required<Pick<ClientOptions, "shutdownTimeoutMs" | "cancelGraceMs">> & ClientOptions;

  private readonly sessionChanged = new Emitter<SessionChanged>();
  private readonly sessionRecovered = new Emitter<SessionRecovered>();
  private readonly compactionStarted = new Emitter<CompactionStartedNotification>();
  private readonly compactionEnded = new Emitter<CompactionEndedNotification>();
  private readonly progress = new Emitter<ProgressParams>();
  private readonly logMessage = new Emitter<LogMessageParams>();
  private readonly stderr = new Emitter<string>();
  private readonly closeEmitter = new Emitter<CloseEvent>();
  private readonly hookNotifications = {
    "hooks/session_compact": new Emitter<CompactHookParams>(),
    "hooks/session_tree": new Emitter<TreeHookParams>(),
  } satisfies { [K in keyof ServerNotifications]: Emitter<ServerNotifications[K]> };

  /** Entries appended, the leaf moved, a compaction landed... (keeps several clients in sync). */
  readonly onSessionChanged: Event<SessionChanged> = this.sessionChanged.event;
  readonly onSessionRecovered: Event<SessionRecovered> = this.sessionRecovered.event;
  readonly onCompactionStarted: Event<CompactionStartedNotification> = this.compactionStarted.event;
  readonly onCompactionEnded: Event<CompactionEndedNotification> = this.compactionEnded.event;
  /** Every `$/progress`, whichever request it belongs to. */
  readonly onProgress: Event<ProgressParams> = this.progress.event;
  readonly onLogMessage: Event<LogMessageParams> = this.logMessage.event;
  /** The daemon's stderr (its log), line by line, when the client started it. */
  readonly onStderr: Event<string> = this.stderr.event;
  readonly onClose: Event<CloseEvent> = this.closeEmitter.event;

  constructor(options: ClientOptions = {}) {
    super();
    this.options = { shutdownTimeoutMs: 5000, cancelGraceMs: 2000, ...options };
  }

  /** Spawn the daemon (`sessiond serve --stdio` unless `command` says otherwise) and connect. */
  async start(options: SpawnOptions = {}): Promise<this> {
    this.expectState("new", "start");
    this.attach(await spawnLink(options, (line) => this.stderr.fire(line)));
    return this;
  }

  /** Connect to a running daemon on a Unix socket or TCP (`token`: the TCP auth token). */
  async connect(options: ConnectOptions): Promise<this> {
    this.expectState("new", "connect");
    this.authToken = options.token;
    this.attach(await connectLink(options));
    return this;
  }

  /** The daemon's process, when this client started it. */
  get process(): ChildProcess | undefined {
    return this.link?.process;
  }

  get isInitialized(): boolean {
    return this.state === "initialized";
  }

  get isClosed(): boolean {
    return this.state === "closed";
  }

  /**
   * `initialize`, then `initialized`. The capabilities declare the hooks registered so
   * far and `llm` when an `onLlmComplete` handler is set: register them before this.
   */
  async initialize(options: InitializeOptions = {}): Promise<InitializeResult> {
    this.expectState("connected", "initialize");
    const authToken = options.authToken ?? this.authToken;
    const result = await this.request("initialize", {
      clientInfo: options.clientInfo ?? { name: "@sessiond/client" },
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {
        hooks: [...this.declaredHooks].sort(),
        llm: this.llmHandler !== undefined,
        optOutNotifications: options.optOutNotifications ?? [],
        ...(options.backgroundProgress ? { window: { workDoneProgress: true } } : {}),
      },
      ...(options.settings ? { settings: options.settings } : {}),
      ...(authToken !== undefined ? { authToken } : {}),
    });
    this.state = "initialized";
    await this.connection!.sendNotification("initialized", {});
    return result;
  }

  /** Any request by its wire name; the typed methods (`newSession`, `append`...) call this. */
  async request<M extends MethodName>(
    method: M,
    params: MethodParams<M>,
    options: CallOptions = {},
  ): Promise<MethodResult<M>> {
    const connection = this.connection;
    if (!connection || this.state === "closed") {
      throw new SessiondError(
        this.closeReason ?? "the client is not connected (call start() or connect() first)",
        ErrorCode.Disconnected,
        "disconnected",
        { kind: "disconnected" },
        method,
      );
    }
    const cancellation = linkCancellation(options);
    if (cancellation.token?.isCancellationRequested) {
      cancellation.dispose();
      throw cancelledError(method, "Request cancelled before it was sent");
    }
    let sent: object = params as object;
    let progressToken: ProgressToken | undefined;
    if (options.onProgress) {
      progressToken = `sessiond-client-${this.nextProgressToken++}`;
      this.progressListeners.set(progressToken, options.onProgress);
      sent = { ...sent, workDoneToken: progressToken };
    }
    let unanswered: { promise: Promise<never>; dispose(): void } | undefined;
    try {
      // vscode-jsonrpc counts a trailing `undefined` as a second param (and sends an array).
      const answer = cancellation.token
        ? connection.sendRequest<MethodResult<M>>(method, sent, cancellation.token)
        : connection.sendRequest<MethodResult<M>>(method, sent);
      if (!cancellation.token) return await answer;
      unanswered = rejectAfterCancel(cancellation.token, this.options.cancelGraceMs, method);
      return await Promise.race([answer, unanswered.promise]);
    } catch (error) {
      throw toSessiondError(error, method, () => this.closeReason);
    } finally {
      unanswered?.dispose();
      cancellation.dispose();
      if (progressToken !== undefined) this.progressListeners.delete(progressToken);
    }
  }

  // ------------------------------------------------------------------ hooks

  /** `hooks/session_before_compact`: answer `{cancel: true}` or `{compaction: {...}}` to replace the summary. */
  onBeforeCompact(handler: HookHandler<BeforeCompactHookParams, BeforeCompactHookResult>): Disposable {
    return this.registerHook("session_before_compact", handler);
  }

  /** `hooks/session.compacting`: change the summarization prompt, add context lines, preserve data. */
  onCompacting(handler: HookHandler<CompactingHookParams, CompactingHookResult>): Disposable {
    return this.registerHook("session.compacting", handler);
  }

  /** `hooks/session_before_tree`: answer `{cancel: true}` or `{summary: {...}}` for the branch left behind. */
  onBeforeTree(handler: HookHandler<BeforeTreeHookParams, BeforeTreeHookResult>): Disposable {
    return this.registerHook("session_before_tree", handler);
  }

  /** `hooks/session_compact`: told after every compaction of a session this client has open. */
  onSessionCompact(listener: (params: CompactHookParams) => void): Disposable {
    this.declareHook("session_compact");
    return this.hookNotifications["hooks/session_compact"].event(listener);
  }

  /** `hooks/session_tree`: told after every tree navigation of a session this client has open. */
  onSessionTree(listener: (params: TreeHookParams) => void): Disposable {
    this.declareHook("session_tree");
    return this.hookNotifications["hooks/session_tree"].event(listener);
  }

  /**
   * `llm/complete`: summarize with the client's own model access. Declares `capabilities.llm`;
   * the daemon uses it when its settings list a `client` summarizer candidate.
   */
  onLlmComplete(handler: LlmCompleteHandler): Disposable {
    this.expectState(["new", "connected"], "onLlmComplete");
    this.llmHandler = handler;
    return {
      dispose: () => {
        if (this.llmHandler === handler) this.llmHandler = undefined;
      },
    };
  }

  private registerHook<P, R>(hook: HookName, handler: HookHandler<P, R>): Disposable {
    this.declareHook(hook);
    const method = HOOKS[hook].method;
    this.hookHandlers.set(method, handler as (params: never, token: CancellationToken) => unknown);
    return {
      dispose: () => {
        if (this.hookHandlers.get(method) === handler) this.hookHandlers.delete(method);
      },
    };
  }

  private declareHook(hook: HookName): void {
    if (!this.declaredHooks.has(hook)) {
      // The daemon learns a client's hooks only from `initialize`.
      this.expectState(["new", "connected"], `registering the ${hook} hook`);
      this.declaredHooks.add(hook);
    }
  }

  // ------------------------------------------------------------------ lifecycle

  /** `shutdown`, `exit`, then wait for the daemon to go (and stop it if it does not). */
  dispose(): Promise<void> {
    this.disposing ??= this.close();
    return this.disposing;
  }

  private async close(): Promise<void> {
    const { link, connection } = this;
    if (link && connection && this.state !== "closed") {
      this.closeReason ??= "the client was disposed";
      if (this.state === "initialized") {
        const timeout = this.options.shutdownTimeoutMs;
        await Promise.race([this.request("shutdown", {}).catch(() => undefined), delay(timeout)]);
      }
      await connection.sendNotification("exit").catch(() => undefined);
      await link.close(this.options.shutdownTimeoutMs);
    }
    this.teardown(this.closeReason ?? "the client was disposed", true);
  }

  private attach(link: Link): void {
    const connection = createMessageConnection(link.reader, link.writer, this.options.logger ?? silentLogger);
    this.link = link;
    this.connection = connection;
    connection.onNotification("session/changed", (p: SessionChanged) => this.sessionChanged.fire(p));
    connection.onNotification("session/recovered", (p: SessionRecovered) => this.sessionRecovered.fire(p));
    connection.onNotification("compaction/started", (p: CompactionStartedNotification) =>
      this.compactionStarted.fire(p),
    );
    connection.onNotification("compaction/ended", (p: CompactionEndedNotification) => this.compactionEnded.fire(p));
    connection.onNotification("window/logMessage", (p: LogMessageParams) => this.logMessage.fire(p));
    for (const method of SERVER_NOTIFICATION_NAMES) {
      const emitter = this.hookNotifications[method] as Emitter<unknown>;
      connection.onNotification(method, (p: unknown) => emitter.fire(p));
    }
    // vscode-jsonrpc routes `$/progress` by token; tokens it does not know arrive here.
    connection.onUnhandledProgress((p) => {
      const params = p as ProgressParams;
      this.progressListeners.get(params.token)?.(params.value);
      this.progress.fire(params);
    });
    for (const hook of Object.values(HOOKS)) {
      if (hook.kind !== "request") continue;
      connection.onRequest(hook.method, async (params: unknown, token: CancellationToken) => {
        const handler = this.hookHandlers.get(hook.method);
        // `{}` is the schema's "no opinion"; vscode-jsonrpc would send `null` for undefined.
        return (handler ? await handler(params as never, token) : undefined) ?? {};
      });
    }
    // Sent only to a client that declared window.workDoneProgress: accepting is all it takes.
    connection.onRequest(
      "window/workDoneProgress/create",
      () => null satisfies ServerRequests["window/workDoneProgress/create"]["result"],
    );
    connection.onRequest("llm/complete", async (params: LlmCompleteParams, token: CancellationToken) => {
      const handler = this.llmHandler;
      if (!handler) throw new ResponseError(ErrorCode.MethodNotFound, "this client has no llm/complete handler");
      const answer = await handler(params, token);
      return (
        typeof answer === "string" ? { text: answer } : answer
      ) satisfies ServerRequests["llm/complete"]["result"];
    });
    // A body that is not JSON-RPC leaves the stream untrustworthy (the daemon never sends
    // one): close, so that the requests waiting fail now instead of never settling.
    connection.onError(([error]) => {
      this.closeReason ??= `the daemon sent a message that could not be read (${error.message})`;
      this.teardown(this.closeReason, false);
    });
    // The stream usually ends a moment before the process is reaped; waiting briefly for
    // the exit lets the pending requests' errors say how the daemon died.
    connection.onClose(() => {
      const fallback = new Promise<string>((resolve) =>
        setTimeout(resolve, 1000, `the connection to ${link.description} closed`).unref(),
      );
      void Promise.race([link.closed, fallback]).then((reason) => this.teardown(reason, false));
    });
    void link.closed.then((reason) => this.teardown(reason, false));
    connection.listen();
    this.state = "connected";
  }

  private teardown(reason: string, expected: boolean): void {
    if (this.state === "closed") return;
    this.state = "closed";
    this.closeReason ??= reason;
    // Rejects the requests still waiting, which `request` turns into `disconnected`.
    this.connection?.dispose();
    this.closeEmitter.fire({ reason: this.closeReason, expected: expected || this.disposing !== undefined });
    for (const emitter of [
      this.sessionChanged,
      this.sessionRecovered,
      this.compactionStarted,
      this.compactionEnded,
      this.progress,
      this.logMessage,
      this.stderr,
      this.closeEmitter,
      ...Object.values(this.hookNotifications),
    ]) {
      emitter.dispose();
    }
    // Lost without dispose(): the daemon is most likely gone already; make sure of it.
    if (!expected && this.disposing === undefined && this.link) void this.link.close(2000);
  }

  private expectState(allowed: State | State[], what: string): void {
    const states = Array.isArray(allowed) ? allowed : [allowed];
    if (!states.includes(this.state)) {
      const hint: Record<State, string> = {
        new: "the client is not connected yet",
        connected: "the client is connected but not initialized",
        initialized: "the client is already initialized (hooks and llm must be registered before initialize)",
        closed: "the client is closed",
      };
      throw new Error(`${what}: ${hint[this.state]}`);
    }
  }
}

function linkCancellation(options: CallOptions): { token: CancellationToken | undefined; dispose(): void } {
  const { token, signal } = options;
  if (!signal) return { token, dispose: () => undefined };
  const source = new CancellationTokenSource();
  const cancel = () => source.cancel();
  if (signal.aborted || token?.isCancellationRequested) cancel();
  signal.addEventListener("abort", cancel, { once: true });
  const subscription = token?.onCancellationRequested(cancel);
  return {
    token: source.token,
    dispose: () => {
      signal.removeEventListener("abort", cancel);
      subscription?.dispose();
      source.dispose();
    },
  };
}

function cancelledError(method: string, message: string): SessiondError {
  return new SessiondError(message, ErrorCode.RequestCancelled, "cancelled", { kind: "cancelled" }, method);
}

/** A promise that rejects as `cancelled` once `token` has been cancelled for `graceMs`. */
function rejectAfterCancel(
  token: CancellationToken,
  graceMs: number,
  method: string,
): { promise: Promise<never>; dispose(): void } {
  let timer: NodeJS.Timeout | undefined;
  let subscription: Disposable | undefined;
  const promise = new Promise<never>((_, reject) => {
    subscription = token.onCancellationRequested(() => {
      timer = setTimeout(
        () => reject(cancelledError(method, "Request cancelled (the daemon did not answer it)")),
        graceMs,
      );
    });
  });
  promise.catch(() => undefined); // only ever observed through the race
  return {
    promise,
    dispose: () => {
      clearTimeout(timer);
      subscription?.dispose();
    },
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
