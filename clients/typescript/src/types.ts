// Types the schema does not carry: LSP's progress and log messages, and the pi message
// and entry shapes that travel as free-form JSON (`session/append` entries, context messages).

/** LSP `WorkDoneProgressBegin | Report | End`, the `value` of `$/progress`. */
export type WorkDoneProgress =
  | { kind: "begin"; title: string; cancellable?: boolean; message?: string; percentage?: number }
  | { kind: "report"; cancellable?: boolean; message?: string; percentage?: number }
  | { kind: "end"; message?: string };

export type ProgressToken = number | string;

export interface ProgressParams {
  token: ProgressToken;
  value: WorkDoneProgress;
}

/** LSP `MessageType` of `window/logMessage`. */
export const MessageType = { Error: 1, Warning: 2, Info: 3, Log: 4, Debug: 5 } as const;

export interface LogMessageParams {
  type: number;
  message: string;
}

// ---------------------------------------------------------------- pi messages

export interface TextContent {
  type: "text";
  text: string;
  textSignature?: string;
}

export interface ImageContent {
  type: "image";
  data: string;
  mimeType: string;
}

export interface ThinkingContent {
  type: "thinking";
  thinking: string;
  thinkingSignature?: string;
}

export interface ToolCall {
  type: "toolCall";
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface TokenUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

export type StopReason = "stop" | "length" | "toolUse" | "error" | "aborted";

export interface UserMessage {
  role: "user";
  content: string | (TextContent | ImageContent)[];
  /** Epoch milliseconds. */
  timestamp: number;
}

export interface AssistantMessage {
  role: "assistant";
  content: (TextContent | ThinkingContent | ToolCall)[];
  api?: string;
  provider: string;
  model: string;
  usage: TokenUsage;
  stopReason: StopReason;
  errorMessage?: string;
  timestamp: number;
}

export interface ToolResultMessage {
  role: "toolResult";
  toolCallId: string;
  toolName: string;
  content: (TextContent | ImageContent)[];
  details?: unknown;
  isError: boolean;
  timestamp: number;
}

export interface CustomMessage {
  role: "custom";
  customType: string;
  content: string | (TextContent | ImageContent)[];
  display: boolean;
  details?: unknown;
  timestamp: number;
}

/**
 * A message as pi's agent holds it. The open member keeps roles this client does not
 * model (bashExecution, the summaries `context/build` synthesizes, OMP's extras) usable.
 */
export type AgentMessage =
  | UserMessage
  | AssistantMessage
  | ToolResultMessage
  | CustomMessage
  | { role: string; timestamp?: number; [field: string]: unknown };

// ---------------------------------------------------------------- entries to append

/** What `session/append` takes: an entry without `id`, `parentId` and `timestamp`. */
export type EntryInput =
  | { type: "message"; message: AgentMessage }
  | {
      type: "custom_message";
      customType: string;
      content: CustomMessage["content"];
      display: boolean;
      details?: unknown;
    }
  | { type: "custom"; customType: string; data?: unknown }
  | { type: "model_change"; provider: string; modelId: string }
  | { type: "thinking_level_change"; thinkingLevel: string }
  | { type: string; [field: string]: unknown };

/** A stored entry as the daemon returns it (the file's JSON, untouched). */
export interface Entry {
  type: string;
  id: string;
  parentId: string | null;
  timestamp: string;
  [field: string]: unknown;
}
