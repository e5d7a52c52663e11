/** The extension's settings (`sessiond.*`), read by the glue, used here without VS Code. */
export interface ExtensionConfig {
  command: string[];
  /** A running daemon's Unix socket to connect to instead of starting one ("" to start one). */
  socket: string;
  /** Setting overrides for the daemon, `{group: {key: value}}`. */
  settings: Record<string, unknown>;
  /** 0: the daemon's default. */
  contextWindow: number;
  llm: { enabled: boolean; vendor: string; family: string };
}

export const DEFAULT_CONFIG: ExtensionConfig = {
  command: ["sessiond", "serve", "--stdio"],
  socket: "",
  settings: {},
  contextWindow: 0,
  llm: { enabled: false, vendor: "", family: "" },
};

/** The settings as read, before checking: settings.json is edited by hand. */
export interface RawConfig {
  command?: unknown;
  socket?: unknown;
  settings?: unknown;
  contextWindow?: unknown;
  llm?: { enabled?: unknown; vendor?: unknown; family?: unknown };
}

/** Fills what is missing or malformed with the defaults. */
export function normalizeConfig(raw: RawConfig): ExtensionConfig {
  const command =
    Array.isArray(raw.command) && raw.command.length > 0 && raw.command.every((a): a is string => typeof a === "string")
      ? raw.command
      : DEFAULT_CONFIG.command;
  // VS Code hands out settings as read-only proxies, which structuredClone (and so
  // anything that copies them across a worker or into a request) refuses; settings.json
  // holds JSON, so a JSON copy is exact.
  const settings = isObject(raw.settings) ? (JSON.parse(JSON.stringify(raw.settings)) as Record<string, unknown>) : {};
  const contextWindow =
    typeof raw.contextWindow === "number" && raw.contextWindow > 0 ? Math.floor(raw.contextWindow) : 0;
  return {
    command: [...command],
    socket: typeof raw.socket === "string" ? raw.socket.trim() : "",
    settings,
    contextWindow,
    llm: {
      enabled: raw.llm?.enabled === true,
      vendor: typeof raw.llm?.vendor === "string" ? raw.llm.vendor : "",
      family: typeof raw.llm?.family === "string" ? raw.llm.family : "",
    },
  };
}

/**
 * The settings sent in `initialize`. With the language model enabled, the client
 * summarizer goes first: the daemon then asks this editor (`llm/complete`), and still
 * has the user's other candidates and its offline fallback if the editor's model fails.
 */
export function initializeSettings(config: ExtensionConfig): Record<string, unknown> {
  const settings = structuredClone(config.settings);
  if (!config.llm.enabled) return settings;
  const summarizer = isObject(settings.summarizer) ? settings.summarizer : {};
  const others = Array.isArray(summarizer.candidates)
    ? summarizer.candidates.filter((c) => !(isObject(c) && c.kind === "client"))
    : [];
  settings.summarizer = { ...summarizer, candidates: [{ kind: "client" }, ...others] };
  return settings;
}

/** Whether a change of configuration needs a new daemon (anything sent at start does). */
export function needsRestart(before: ExtensionConfig, after: ExtensionConfig): boolean {
  return (
    JSON.stringify([before.command, before.socket, before.settings, before.llm.enabled]) !==
    JSON.stringify([after.command, after.socket, after.settings, after.llm.enabled])
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
