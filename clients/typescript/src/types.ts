// Types the schema does not name: the progress token and LSP's message types. Entries, messages and every payload are generated from
// protocol/schema.json (./generated/protocol.ts).
import type { LlmCompleteParams, ProgressParams, WorkDoneProgress } from "./generated/protocol.js";

export type { WorkDoneProgress };

/** The params of `llm/complete` (the name earlier versions of this client used). */
export type CompletionRequest = LlmCompleteParams;

export type ProgressToken = ProgressParams["token"];

/** LSP `MessageType` of `window/logMessage`. */
export const MessageType = { Error: 1, Warning: 2, Info: 3, Log: 4, Debug: 5 } as const;

/** pi's stop reasons (the schema types `stopReason` as a string: files may hold others). */
export type StopReason = "stop" | "length" | "toolUse" | "error" | "aborted";
