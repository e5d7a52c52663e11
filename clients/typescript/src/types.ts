// Types the schema does not name: the progress token and LSP's message types. Entries, messages and every payload are generated from
// protocol/schema.json (./generated/protocol.ts).
import type { ProgressParams, WorkDoneProgress } from "./generated/protocol.js";

export type { WorkDoneProgress };

export type ProgressToken = ProgressParams["token"];

/** LSP `MessageType` of `window/logMessage`. */
export const MessageType = { Error: 1, Warning: 2, Info: 3, Log: 4, Debug: 5 } as const;

/** pi's stop reasons (the schema types `stopReason` as a string: files may hold others). */
export type StopReason = "stop" | "length" | "toolUse" | "error" | "aborted";
