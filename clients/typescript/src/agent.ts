import type {
  AgentMessage,
  AppendResult,
  EntryInput,
  MessageInput,
  ModelRef,
  TurnEndedResult,
} from "./generated/protocol.js";
import type { SessionMethods } from "./methods.js";
import type { WorkDoneProgress } from "./types.js";

/** The pi agent events the bridge acts on; every other event passes through untouched. */
export type AgentEvent =
  | { type: "message_end"; message: AgentMessage }
  | { type: "agent_end"; messages?: AgentMessage[] }
  | { type: string; [field: string]: unknown };

/** What the frontend should do once the agent stopped. */
export interface TurnDecision {
  /**
   * `none`: wait for the user. `retry`: the context overflowed and was compacted: drop the
   * failed assistant message from the agent's state and run the agent again. `continue`:
   * a threshold compaction ran and the agent should go on: send `prompt` as the next user turn.
   */
  action: TurnEndedResult["action"];
  prompt?: string;
  /** Whether a compaction ran: reload the agent's messages with `context()`. */
  compacted: boolean;
  result: TurnEndedResult;
}

export interface AgentBridgeOptions {
  /** The model's context window, or a getter for it (the model may change). */
  contextWindow?: number | (() => number | undefined);
  /** The model in use now; default: the provider and model of the last assistant message. */
  model?: ModelRef | (() => ModelRef | undefined);
  /** Append only while the leaf is where this bridge left it (another client moved it: `conflict`). */
  guardLeaf?: boolean;
  /** Report `$/progress` of compactions run at the end of a turn. */
  onProgress?: (value: WorkDoneProgress) => void;
}

type Client = Pick<SessionMethods, "append" | "turnEnded" | "buildContext">;

/**
 * Persists a pi-style agent's events into a sessiond session, so that the frontend only
 * forwards events and obeys the returned decision:
 *
 * - `message_end` of a `user`, `assistant` or `toolResult` message: a `message` entry;
 *   of a `custom` message: a `custom_message` entry (what pi's AgentSession does);
 * - `agent_end`: `agent/turnEnded`, which may compact, answered with a TurnDecision.
 *
 * Events are handled one at a time in arrival order, even when the caller does not wait.
 */
export class AgentSessionBridge {
  private queue: Promise<unknown> = Promise.resolve();
  private lastModel: ModelRef | undefined;
  private leaf: string | null | undefined;

  constructor(
    private readonly client: Client,
    readonly sessionId: string,
    private readonly options: AgentBridgeOptions = {},
  ) {}

  /** The leaf after the last append this bridge made (undefined before the first). */
  get leafId(): string | null | undefined {
    return this.leaf;
  }

  /** Handle one agent event; resolves with the decision for `agent_end`, else undefined. */
  handle(event: AgentEvent): Promise<TurnDecision | undefined> {
    if (event.type === "message_end" && isMessage(event.message)) {
      const message = event.message;
      return this.enqueue(async () => {
        await this.persist(message);
        return undefined;
      });
    }
    if (event.type === "agent_end") return this.enqueue(() => this.endTurn());
    return Promise.resolve(undefined);
  }

  /** Append a message whatever its role (for messages the frontend persists itself, as pi's bash path). */
  appendMessage(message: MessageInput): Promise<AppendResult> {
    return this.enqueue(() => this.appendEntries([{ type: "message", message }]));
  }

  /** The agent-format messages at the leaf: the agent's state after a compaction. */
  async context(): Promise<AgentMessage[]> {
    await this.idle();
    return (await this.client.buildContext({ sessionId: this.sessionId, format: "agent" })).messages;
  }

  /** Resolves when every event handed over so far has been handled. */
  async idle(): Promise<void> {
    await this.queue.catch(() => undefined);
  }

  private enqueue<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.catch(() => undefined).then(work);
    this.queue = run;
    return run;
  }

  private async persist(message: AgentMessage): Promise<void> {
    if (message.role === "assistant" && typeof message.provider === "string" && typeof message.model === "string") {
      this.lastModel = { provider: message.provider, modelId: message.model };
    }
    const entry = entryFor(message);
    if (entry) await this.appendEntries([entry]);
  }

  private async appendEntries(entries: EntryInput[]): Promise<AppendResult> {
    // "" is "the session has no entry yet" (null would mean no guard at all).
    const guard = this.options.guardLeaf && this.leaf !== undefined ? { expectedLeafId: this.leaf ?? "" } : {};
    const result = await this.client.append({ sessionId: this.sessionId, entries, ...guard });
    this.leaf = result.leafId;
    return result;
  }

  private async endTurn(): Promise<TurnDecision> {
    const contextWindow = resolve(this.options.contextWindow);
    const model = resolve(this.options.model) ?? this.lastModel;
    const result = await this.client.turnEnded(
      {
        sessionId: this.sessionId,
        ...(contextWindow !== undefined ? { contextWindow } : {}),
        ...(model !== undefined ? { model } : {}),
      },
      this.options.onProgress ? { onProgress: this.options.onProgress } : {},
    );
    if (result.compaction) this.leaf = result.compaction.entryId;
    return {
      action: result.action,
      ...(result.prompt != null ? { prompt: result.prompt } : {}),
      compacted: result.compaction != null,
      result,
    };
  }
}

function entryFor(message: AgentMessage): EntryInput | undefined {
  switch (message.role) {
    case "user":
    case "toolResult":
      return { type: "message", message };
    case "assistant":
      // pi's assistant messages always carry `api`; the daemon refuses one without it.
      return { type: "message", message: message as MessageInput };
    case "custom":
      return {
        type: "custom_message",
        customType: message.customType,
        content: message.content,
        display: message.display,
        ...(message.details !== undefined ? { details: message.details } : {}),
      };
    default:
      return undefined;
  }
}

function isMessage(value: unknown): value is AgentMessage {
  return typeof value === "object" && value !== null && typeof (value as { role?: unknown }).role === "string";
}

function resolve<T>(value: T | (() => T | undefined) | undefined): T | undefined {
  return typeof value === "function" ? (value as () => T | undefined)() : value;
}
