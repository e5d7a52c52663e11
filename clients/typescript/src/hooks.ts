import type { HookName, ServerNotificationName, ServerRequestName } from "./generated/protocol.js";

export type { HookName };

interface HookSpec {
  method: ServerRequestName | ServerNotificationName;
  kind: "request" | "notification";
}

/** Every hook of the schema: the compiler insists on one row per name. */
export const HOOKS = {
  session_before_compact: { method: "hooks/session_before_compact", kind: "request" },
  "session.compacting": { method: "hooks/session.compacting", kind: "request" },
  session_compact: { method: "hooks/session_compact", kind: "notification" },
  session_before_tree: { method: "hooks/session_before_tree", kind: "request" },
  session_tree: { method: "hooks/session_tree", kind: "notification" },
} as const satisfies Record<HookName, HookSpec>;
