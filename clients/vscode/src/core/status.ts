import type {
  CompactionEndedNotification,
  CompactionStartedNotification,
  Usage,
  WorkDoneProgress,
} from "@sessiond/client";
import { inert } from "./text.js";

/** What the status bar item knows. Updated by `reduceStatus`, shown by `renderStatus`. */
export interface StatusState {
  connected: boolean;
  sessionName?: string;
  usage?: Usage;
  compacting?: { reason: string; message?: string; percentage?: number };
  /** The last compaction's outcome (or why the daemon went away), until the next compaction starts. */
  lastOutcome?: string;
  /**
   * A summary written ahead of the threshold: still being written (with the `$/progress`
   * token its `compaction/started` named, and the latest report on it), or ready for the
   * next compaction.
   */
  background?: { phase: "writing"; token?: string; message?: string } | { phase: "ready" };
  /** Automatic compaction is paused by the no-loop rule: the daemon's message, which says what to do. */
  paused?: string;
}

export type StatusEvent =
  | { type: "connected" }
  | { type: "disconnected"; reason?: string }
  | { type: "session"; name?: string }
  | { type: "usage"; usage: Usage }
  | { type: "compactionStarted"; event: CompactionStartedNotification }
  | { type: "progress"; value: WorkDoneProgress }
  | { type: "backgroundProgress"; token: string | number; value: WorkDoneProgress }
  | { type: "compactionEnded"; event: CompactionEndedNotification }
  | { type: "undone" };

export interface StatusView {
  text: string;
  tooltip: string;
  /** The context is past the compaction threshold, or the last compaction failed. */
  warning: boolean;
}

export const INITIAL_STATUS: StatusState = { connected: false };

/** The pause as told by a usage alone (its announcement, with the figures, came before). */
export const PAUSED_UNANNOUNCED =
  "Automatic compaction paused: the last compaction left the context over the threshold, so another one " +
  "would free too little. Use a model with a larger context window, lower compaction.keepRecentTokens, " +
  "or compact manually.";

export function reduceStatus(state: StatusState, event: StatusEvent): StatusState {
  switch (event.type) {
    case "connected":
      return { ...state, connected: true };
    case "disconnected":
      return { connected: false, ...(event.reason ? { lastOutcome: event.reason } : {}) };
    case "session":
      return { connected: state.connected, ...(event.name ? { sessionName: event.name } : {}) };
    case "usage": {
      // The daemon says whether the no-loop rule pauses automatic compaction, so a window
      // opened after the one announcement learns it too, and a larger window or a lower
      // keepRecentTokens lifts it.
      if (event.usage.autoCompactionPaused) {
        return { ...state, usage: event.usage, paused: state.paused ?? PAUSED_UNANNOUNCED };
      }
      const { paused: _lifted, ...rest } = state;
      return { ...rest, usage: event.usage };
    }
    case "compactionStarted": {
      // A background summary runs beside the agent: the usage stays in view.
      if (event.event.reason === "background") {
        const token = event.event.progressToken;
        return { ...state, background: { phase: "writing", ...(token ? { token } : {}) } };
      }
      const { lastOutcome: _previous, ...rest } = state;
      return { ...rest, compacting: { reason: event.event.reason } };
    }
    case "progress": {
      // Progress reports only mean something while a compaction runs.
      if (!state.compacting || event.value.kind === "end") return state;
      return {
        ...state,
        compacting: {
          ...state.compacting,
          ...(event.value.message != null ? { message: event.value.message } : {}),
          ...(event.value.percentage != null ? { percentage: event.value.percentage } : {}),
        },
      };
    }
    case "backgroundProgress": {
      const background = state.background;
      // Only the reports on the token of the summary being written are about it.
      if (background?.phase !== "writing" || background.token === undefined || event.token !== background.token) {
        return state;
      }
      if (event.value.kind !== "report" || event.value.message == null) return state;
      return { ...state, background: { ...background, message: event.value.message } };
    }
    case "compactionEnded":
      return compactionEnded(state, event.event);
    case "undone": {
      // The undo dropped any background summary (it was prepared on the branch left) and
      // put the context back over the threshold: the next turn compacts again.
      const { background: _dropped, paused: _lifted, ...rest } = state;
      return { ...rest, lastOutcome: "Compaction undone" };
    }
  }
}

function compactionEnded(state: StatusState, event: CompactionEndedNotification): StatusState {
  const { background, paused, compacting, ...rest } = state;
  if (event.reason === "background") {
    const kept = { ...rest, ...(compacting ? { compacting } : {}), ...(paused !== undefined ? { paused } : {}) };
    if (event.aborted) return kept;
    if (event.errorMessage) return { ...kept, lastOutcome: event.errorMessage };
    return { ...kept, background: { phase: "ready" } };
  }
  if (event.paused) {
    return {
      ...rest,
      ...(background ? { background } : {}),
      paused: event.errorMessage ?? "Automatic compaction paused.",
    };
  }
  // A compaction written used (or dropped) the background summary and ended any pause.
  const written = event.entryId != null;
  return {
    ...rest,
    ...(background && !written ? { background } : {}),
    ...(paused !== undefined && !written ? { paused } : {}),
    lastOutcome: describeEnded(event),
  };
}

export function renderStatus(state: StatusState): StatusView {
  if (!state.connected) {
    return {
      text: "$(debug-disconnect) sessiond",
      tooltip: state.lastOutcome !== undefined ? inert(state.lastOutcome) : "sessiond is not running",
      warning: false,
    };
  }
  // A session's name and the daemon's messages quote files and models: shown inert.
  const name = state.sessionName ? `${inert(state.sessionName)}\n` : "";
  if (state.compacting) {
    const detail = state.compacting.message ? `: ${inert(state.compacting.message)}` : "";
    const percent = state.compacting.percentage !== undefined ? ` ${state.compacting.percentage}%` : "";
    return {
      text: `$(sync~spin) Compacting${percent}…`,
      tooltip: `${name}Compacting the session (${state.compacting.reason})${detail}`,
      warning: false,
    };
  }
  const usage = state.usage;
  if (!usage) {
    return { text: "$(history) sessiond", tooltip: `${name}No session open`, warning: false };
  }
  const failed = state.lastOutcome?.startsWith("Compaction failed") ?? false;
  const paused = state.paused !== undefined;
  const phase = state.background?.phase;
  const marks = `${phase === "writing" ? " $(loading~spin)" : phase === "ready" ? " $(pass)" : ""}${paused ? " $(debug-pause)" : ""}`;
  const lines = [
    `${name}Context: ${usage.tokens.toLocaleString("en-US")} of ${usage.contextWindow.toLocaleString("en-US")} tokens (${usage.percent}%)`,
    `Compaction threshold: ${usage.threshold.toLocaleString("en-US")} tokens${usage.shouldCompact ? " (reached)" : ""}`,
    `Estimated with: ${usage.estimator}`,
  ];
  if (state.lastOutcome) lines.push(inert(state.lastOutcome));
  if (state.background?.phase === "writing") {
    // The report quotes the model's name: shown inert.
    const report = state.background.message ? ` (${inert(state.background.message)})` : "";
    lines.push(`A summary is being written in the background${report}; the next compaction will use it.`);
  } else if (phase === "ready") {
    lines.push("A summary written in the background is ready: the next compaction commits it without waiting.");
  }
  // The daemon's message says why and what to do ("Automatic compaction paused: ...").
  if (paused) lines.push(inert(state.paused!));
  return {
    text: `$(history) ${formatPercent(usage.percent)} · ${formatTokens(usage.tokens)}/${formatTokens(usage.contextWindow)}${marks}`,
    tooltip: lines.join("\n"),
    warning: usage.shouldCompact || failed || paused,
  };
}

/** 1234 -> "1.2k", 128000 -> "128k", 1500000 -> "1.5M". */
export function formatTokens(tokens: number): string {
  if (tokens < 1000) return String(tokens);
  if (tokens < 1_000_000) return `${trim(tokens / 1000)}k`;
  return `${trim(tokens / 1_000_000)}M`;
}

function trim(value: number): string {
  return value >= 100 ? String(Math.round(value)) : value.toFixed(1).replace(/\.0$/, "");
}

function formatPercent(percent: number): string {
  return `${percent < 10 ? percent.toFixed(1).replace(/\.0$/, "") : Math.round(percent)}%`;
}

function describeEnded(event: CompactionEndedNotification): string {
  if (event.aborted) return "Compaction aborted";
  if (event.errorMessage) return `Compaction failed: ${event.errorMessage}`;
  if (event.skipped) return "Compaction skipped";
  const how = `${event.reason}${event.prepared ? ", summary written in the background" : ""}`;
  if (event.tokensBefore != null && event.tokensAfter != null) {
    return `Compacted (${how}): ${formatTokens(event.tokensBefore)} → ${formatTokens(event.tokensAfter)} tokens`;
  }
  return `Compacted (${how})`;
}
