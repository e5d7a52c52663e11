import { Emitter, SessiondClient, type Entry, type Event, type Usage } from "@sessiond/client";
import { initializeSettings, type ExtensionConfig } from "./config.js";
import {
  compactFlow,
  coveredFlow,
  navigateFlow,
  pickSessionFlow,
  undoCompactionFlow,
  type NavigateMode,
  type Ui,
} from "./flows.js";
import { createLlmCompleteHandler, type ChatModelSource } from "./llm.js";
import {
  INITIAL_STATUS,
  reduceStatus,
  renderStatus,
  type StatusEvent,
  type StatusState,
  type StatusView,
} from "./status.js";
import { inert } from "./text.js";
import { buildTreeModel, type TreeItemModel } from "./treeModel.js";

export interface OpenedSession {
  sessionId: string;
  path: string;
  name?: string;
}

export interface ControllerOptions {
  config: ExtensionConfig;
  /** Where and how the daemon runs (the workspace folder, the environment). */
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** The editor's models, used for `llm/complete` when `config.llm.enabled`. */
  chatModels?: ChatModelSource;
  log?: (line: string) => void;
  clientVersion?: string;
}

/**
 * Everything the extension does, minus VS Code: the daemon's lifecycle, the open session,
 * and the state the views show. The glue turns its events into a tree view refresh and
 * a status bar update, and its methods into commands.
 */
export class SessionController {
  private client: SessiondClient | undefined;
  private starting: Promise<SessiondClient> | undefined;
  private opened: OpenedSession | undefined;
  private state: StatusState = INITIAL_STATUS;
  private options: ControllerOptions;
  private disposed = false;
  private readonly treeChanged = new Emitter<void>();
  private readonly statusChanged = new Emitter<StatusView>();
  private readonly sessionChanged = new Emitter<OpenedSession | undefined>();
  private readonly warned = new Emitter<string>();

  /** The session's tree changed: entries appended, the leaf moved, a compaction landed. */
  readonly onDidChangeTree: Event<void> = this.treeChanged.event;
  readonly onDidChangeStatus: Event<StatusView> = this.statusChanged.event;
  readonly onDidChangeSession: Event<OpenedSession | undefined> = this.sessionChanged.event;
  /**
   * Something the user should hear of although no command of theirs caused it: automatic
   * compaction paused by the no-loop rule (the daemon's message, which says what to do).
   * Not inert: the glue makes it so.
   */
  readonly onDidWarn: Event<string> = this.warned.event;

  constructor(options: ControllerOptions) {
    this.options = options;
  }

  get session(): OpenedSession | undefined {
    return this.opened;
  }

  get status(): StatusView {
    return renderStatus(this.state);
  }

  /** The running client, started (and the open session reopened) on first use. */
  ensureClient(): Promise<SessiondClient> {
    if (this.disposed) return Promise.reject(new Error("the sessiond extension is shutting down"));
    if (this.client && !this.client.isClosed) return Promise.resolve(this.client);
    this.starting ??= this.start().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async openSession(path: string): Promise<OpenedSession> {
    const client = await this.ensureClient();
    const result = await client.openSession({ path });
    const previous = this.opened;
    if (previous && previous.sessionId !== result.sessionId) {
      await client.closeSession({ sessionId: previous.sessionId }).catch(() => undefined);
    }
    this.opened = { sessionId: result.sessionId, path: result.path, ...(result.name ? { name: result.name } : {}) };
    this.update({ type: "session", ...(result.name ? { name: result.name } : {}) });
    this.sessionChanged.fire(this.opened);
    this.treeChanged.fire();
    await this.refreshUsage();
    return this.opened;
  }

  /** The tree view's rows for the open session (none without one). */
  async treeModel(): Promise<TreeItemModel[]> {
    if (!this.opened) return [];
    const client = await this.ensureClient();
    return buildTreeModel(await client.tree({ sessionId: this.opened.sessionId }));
  }

  async refreshUsage(): Promise<Usage | undefined> {
    const session = this.opened;
    const client = this.client;
    if (!session || !client || client.isClosed) return undefined;
    const usage = await client.contextUsage({ sessionId: session.sessionId, ...this.window() });
    if (this.opened === session) this.update({ type: "usage", usage });
    return usage;
  }

  /** The "open session" command: `path` from the explorer, else a pick. */
  async pickAndOpen(ui: Ui, path?: string): Promise<OpenedSession | undefined> {
    const chosen = path ?? (await pickSessionFlow(await this.ensureClient(), ui, this.options.cwd));
    return chosen ? this.openSession(chosen) : undefined;
  }

  async compact(ui: Ui) {
    const session = this.requireSession(ui);
    if (!session) return undefined;
    const client = await this.ensureClient();
    return compactFlow(client, session.sessionId, ui, {
      onProgress: (value) => this.update({ type: "progress", value }),
    });
  }

  /** Undo the context's newest compaction (`entryId`: the one the user picked, which must be it). */
  async undoCompaction(ui: Ui, entryId?: string) {
    const session = this.requireSession(ui);
    if (!session) return undefined;
    return undoCompactionFlow(await this.ensureClient(), session.sessionId, ui, entryId);
  }

  /** The entries a compaction's summary stands for (default: the newest on the path); the one picked. */
  async showCovered(ui: Ui, entryId?: string): Promise<Entry | undefined> {
    const session = this.requireSession(ui);
    if (!session) return undefined;
    return coveredFlow(await this.ensureClient(), session.sessionId, ui, entryId);
  }

  async navigate(ui: Ui, target?: { targetId?: string; mode?: NavigateMode }) {
    const session = this.requireSession(ui);
    if (!session) return undefined;
    const client = await this.ensureClient();
    return navigateFlow(client, session.sessionId, ui, target, {
      ...this.window(),
      onProgress: (value) => this.update({ type: "progress", value }),
    });
  }

  /** New settings: a new daemon if the old one was started with other ones. */
  async reconfigure(config: ExtensionConfig, restart: boolean): Promise<void> {
    this.options = { ...this.options, config };
    if (restart) await this.restart();
    else await this.refreshUsage().catch(() => undefined);
  }

  async restart(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.dispose();
    if (this.opened) await this.ensureClient();
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    await this.client?.dispose();
    this.treeChanged.dispose();
    this.statusChanged.dispose();
    this.sessionChanged.dispose();
    this.warned.dispose();
  }

  private async start(): Promise<SessiondClient> {
    const { config } = this.options;
    // The daemon's stderr and warnings quote files and clients: one inert line each.
    const log = (line: string) => this.options.log?.(inert(line));
    const client = new SessiondClient();
    if (config.llm.enabled && this.options.chatModels) {
      client.onLlmComplete(
        createLlmCompleteHandler(this.options.chatModels, (call) =>
          log(
            `llm/complete (${call.purpose}) answered by ${call.model}: ${call.promptChars} → ${call.answerChars} characters in ${call.ms} ms`,
          ),
        ),
      );
    }
    client.onStderr((line) => log(line));
    client.onSessionChanged((event) => {
      if (client !== this.client || event.sessionId !== this.opened?.sessionId) return;
      if (event.reason === "undo") this.update({ type: "undone" });
      this.treeChanged.fire();
      void this.refreshUsage().catch((error: unknown) => log(`context/usage failed: ${String(error)}`));
    });
    client.onCompactionStarted((event) => {
      if (event.sessionId === this.opened?.sessionId) this.update({ type: "compactionStarted", event });
    });
    // A summary written in the background reports on a token the daemon made (accepted
    // through backgroundProgress below); the status matches it to the summary.
    client.onProgress((params) => {
      if (client === this.client) this.update({ type: "backgroundProgress", token: params.token, value: params.value });
    });
    client.onCompactionEnded((event) => {
      if (event.sessionId !== this.opened?.sessionId) return;
      this.update({ type: "compactionEnded", event });
      // Sent once per pause: the one time to say it.
      if (event.paused && !this.disposed) this.warned.fire(event.errorMessage ?? "Automatic compaction paused.");
    });
    client.onClose((event) => {
      if (client !== this.client) return;
      this.client = undefined;
      if (!event.expected) log(`sessiond stopped: ${event.reason}`);
      this.update({ type: "disconnected", ...(event.expected ? {} : { reason: firstLine(event.reason) }) });
    });
    if (config.socket) {
      // Someone else's daemon (an agent's, say): the sessions it holds are shared, not locked.
      await client.connect({ socket: config.socket });
    } else {
      await client.start({
        command: config.command,
        ...(this.options.cwd ? { cwd: this.options.cwd } : {}),
        ...(this.options.env ? { env: this.options.env } : {}),
      });
    }
    try {
      const result = await client.initialize({
        clientInfo: {
          name: "sessiond-vscode",
          ...(this.options.clientVersion ? { version: this.options.clientVersion } : {}),
        },
        settings: initializeSettings(config),
        backgroundProgress: true,
      });
      for (const warning of result.warnings ?? []) log(`sessiond: ${warning}`);
    } catch (error) {
      await client.dispose();
      throw error;
    }
    this.client = client;
    this.update({ type: "connected" });
    if (this.opened) {
      // A restarted daemon knows no session: reopen the one the views show.
      const reopened = await client.openSession({ path: this.opened.path });
      this.opened = { ...this.opened, sessionId: reopened.sessionId };
      this.treeChanged.fire();
      await this.refreshUsage();
    }
    return client;
  }

  private window(): { contextWindow?: number } {
    return this.options.config.contextWindow > 0 ? { contextWindow: this.options.config.contextWindow } : {};
  }

  private requireSession(ui: Ui): OpenedSession | undefined {
    if (!this.opened) ui.info("Open a session first (sessiond: Open Session…).");
    return this.opened;
  }

  private update(event: StatusEvent): void {
    this.state = reduceStatus(this.state, event);
    if (!this.disposed) this.statusChanged.fire(renderStatus(this.state));
  }
}

function firstLine(text: string): string {
  return text.split("\n", 1)[0]!;
}
