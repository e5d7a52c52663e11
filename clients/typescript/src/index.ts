export { SessiondClient } from "./client.js";
export type { ClientOptions, CloseEvent, HookHandler, InitializeOptions, LlmCompleteHandler } from "./client.js";
export { SessionMethods, METHOD_WRAPPERS } from "./methods.js";
export type {
  AppendInput,
  BuildContextOutput,
  CallOptions,
  EntriesOutput,
  EntryOutput,
  MethodParams,
  MethodResult,
  NavigateOutput,
  PathOutput,
  RunCompactionOutput,
} from "./methods.js";
export { ErrorCode, SessiondError, isSessiondError } from "./errors.js";
export type { ErrorKind } from "./errors.js";
export { HOOKS } from "./hooks.js";
export type { HookName } from "./hooks.js";
export { DEFAULT_COMMAND, splitCommandLine } from "./transport.js";
export type { ConnectOptions, SpawnOptions } from "./transport.js";
export { AgentSessionBridge } from "./agent.js";
export type { AgentBridgeOptions, AgentEvent, TurnDecision } from "./agent.js";
export * from "./types.js";
export * from "./generated/protocol.js";
export { CancellationTokenSource, Emitter, ResponseError } from "vscode-jsonrpc/node";
export type { CancellationToken, Disposable, Event } from "vscode-jsonrpc/node";
