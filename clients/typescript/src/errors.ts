import { ResponseError } from "vscode-jsonrpc/node";

/**
 * The `data.kind` strings the daemon puts on its errors (daemon/sessiond/errors.py),
 * plus `disconnected`, which this client uses when the daemon went away mid-request.
 * The union stays open (`string & {}`) because a newer daemon may add kinds.
 */
export type ErrorKind =
  | "parseError"
  | "invalidRequest"
  | "methodNotFound"
  | "serverNotInitialized"
  | "unauthorized"
  | "invalidParams"
  | "invalidEntry"
  | "trustedSetting"
  | "notFound"
  | "conflict"
  | "busy"
  | "cancelled"
  | "nothingToCompact"
  | "alreadyCompacted"
  | "nothingToUndo"
  | "summarizerFailed"
  | "sessionLocked"
  | "invalidSessionFile"
  | "storage"
  | "notAllowed"
  | "limitExceeded"
  | "fileChanged"
  | "originalUnavailable"
  | "internal"
  | "disconnected"
  | (string & {});

/**
 * Numeric codes of the protocol; kinds are finer (invalidParams, invalidEntry and
 * trustedSetting share a code).
 */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  ServerNotInitialized: -32002,
  Unauthorized: -32001,
  RequestCancelled: -32800,
  NotFound: -32010,
  Conflict: -32011,
  Busy: -32012,
  NothingToCompact: -32013,
  AlreadyCompacted: -32014,
  SummarizerFailed: -32015,
  SessionLocked: -32016,
  InvalidSessionFile: -32017,
  Storage: -32018,
  NotAllowed: -32019,
  LimitExceeded: -32021,
  FileChanged: -32022,
  NothingToUndo: -32023,
  OriginalUnavailable: -32024,
  /** Client side: the connection closed before the answer came. */
  Disconnected: -32099,
} as const;

const KIND_BY_CODE: Record<number, ErrorKind> = {
  [ErrorCode.ParseError]: "parseError",
  [ErrorCode.InvalidRequest]: "invalidRequest",
  [ErrorCode.MethodNotFound]: "methodNotFound",
  [ErrorCode.InvalidParams]: "invalidParams",
  [ErrorCode.InternalError]: "internal",
  [ErrorCode.ServerNotInitialized]: "serverNotInitialized",
  [ErrorCode.Unauthorized]: "unauthorized",
  [ErrorCode.RequestCancelled]: "cancelled",
};

/** An error answer from the daemon, or the loss of the daemon while waiting for one. */
export class SessiondError extends Error {
  override readonly name = "SessiondError";

  constructor(
    message: string,
    readonly code: number,
    readonly kind: ErrorKind,
    /** The whole `error.data` object: `kind` plus details such as `entryId` or `sessionId`. */
    readonly data: Record<string, unknown>,
    /** The request that failed. */
    readonly method?: string,
  ) {
    super(message);
  }
}

/** True when `error` is a SessiondError, of `kind` if given. */
export function isSessiondError(error: unknown, kind?: ErrorKind): error is SessiondError {
  return error instanceof SessiondError && (kind === undefined || error.kind === kind);
}

/**
 * The SessiondError for what a request rejected with. vscode-jsonrpc rejects with a
 * ResponseError both for the daemon's answers and for requests still pending when the
 * connection closed; `disconnected()` tells them apart (the reason, once the link is gone).
 */
export function toSessiondError(error: unknown, method: string, disconnected: () => string | undefined): unknown {
  if (error instanceof SessiondError) return error;
  const gone = disconnected();
  if (error instanceof ResponseError) {
    const data = isRecord(error.data) ? error.data : {};
    const kind = typeof data.kind === "string" ? data.kind : KIND_BY_CODE[error.code];
    // vscode-jsonrpc's own codes (-32097 pending response rejected, -32099 write error)
    // mean the link broke rather than the daemon answering.
    if (kind === undefined && gone !== undefined) {
      return new SessiondError(gone, ErrorCode.Disconnected, "disconnected", { kind: "disconnected" }, method);
    }
    return new SessiondError(
      error.message,
      error.code,
      kind ?? "internal",
      { kind: kind ?? "internal", ...data },
      method,
    );
  }
  if (gone !== undefined) {
    return new SessiondError(gone, ErrorCode.Disconnected, "disconnected", { kind: "disconnected" }, method);
  }
  return error;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
