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
}

export type StatusEvent =
  | { type: "connected" }
  | { type: "disconnected"; reason?: string }
  | { type: "session"; name?: string }
  | { type: "usage"; usage: Usage }
  | { type: "compactionStarted"; event: CompactionStartedNotification }
  | { type: "progress"; value: WorkDoneProgress }
  | { type: "compactionEnded"; event: CompactionEndedNotification };

export interface StatusView {
  text: string;
  tooltip: string;
  /** The context is past the compaction threshold, or the last compaction failed. */
  warning: boolean;
}

export const INITIAL_STATUS: StatusState = { connected: false };

export function reduceStatus(state: StatusState, event: StatusEvent): StatusState {
  switch (event.type) {
    case "connected":
      return { ...state, connected: true };
    case "disconnected":
      return { connected: false, ...(event.reason ? { lastOutcome: event.reason } : {}) };
    case "session":
      return { connected: state.connected, ...(event.name ? { sessionName: event.name } : {}) };
    case "usage":
      return { ...state, usage: event.usage };
    case "compactionStarted": {
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
    case "compactionEnded": {
      const { compacting: _done, ...rest } = state;
      return { ...rest, lastOutcome: describeEnded(event.event) };
    }
  }
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
  const lines = [
    `${name}Context: ${usage.tokens.toLocaleString("en-US")} of ${usage.contextWindow.toLocaleString("en-US")} tokens (${usage.percent}%)`,
    `Compaction threshold: ${usage.threshold.toLocaleString("en-US")} tokens${usage.shouldCompact ? " (reached)" : ""}`,
    `Estimated with: ${usage.estimator}`,
  ];
  if (state.lastOutcome) lines.push(inert(state.lastOutcome));
  return {
    text: `$(history) ${formatPercent(usage.percent)} · ${formatTokens(usage.tokens)}/${formatTokens(usage.contextWindow)}`,
    tooltip: lines.join("\n"),
    warning: usage.shouldCompact || failed,
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
  if (event.tokensBefore != null && event.tokensAfter != null) {
    return `Compacted (${event.reason}): ${formatTokens(event.tokensBefore)} → ${formatTokens(event.tokensAfter)} tokens`;
  }
  return `Compacted (${event.reason})`;
}
