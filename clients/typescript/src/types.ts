// Types the schema does not name: LSP's progress value as one union, its token, and
// LSP's message types. Entries, messages and every payload are generated from
// protocol/schema.json (./generated/protocol.ts).
import type { ProgressParams } from "./generated/protocol.js";

/** LSP `WorkDoneProgressBegin | Report | End`, the `value` of `$/progress`. */
export type WorkDoneProgress = ProgressParams["value"];

export type ProgressToken = ProgressParams["token"];

/** LSP `MessageType` of `window/logMessage`. */
export const MessageType = { Error: 1, Warning: 2, Info: 3, Log: 4, Debug: 5 } as const;

/** pi's stop reasons (the schema types `stopReason` as a string: files may hold others). */
export type StopReason = "stop" | "length" | "toolUse" | "error" | "aborted";
