import type { Entry } from "@sessiond/client";

/**
 * One line saying what an entry holds, for lists of whole entries (`session/entries`), as
 * the daemon's tree previews do for tree nodes. Not inert: the caller makes it so where it
 * shows it (`pickText`, `inert`).
 */
export function entryPreview(entry: Entry, maxLength = 100): string {
  const text = previewText(entry as unknown as Record<string, unknown>)
    .replace(/\s+/g, " ")
    .trim();
  return text.length > maxLength ? `${text.slice(0, maxLength - 1)}…` : text;
}

/** The entry's type, with a message's role: "message (user)", "compaction". */
export function entryKind(entry: Entry): string {
  const role = entry.type === "message" ? (entry.message as { role?: unknown }).role : undefined;
  return typeof role === "string" ? `${entry.type} (${role})` : entry.type;
}

// Entries come from files any program may have written: every field is checked, never trusted.
function previewText(entry: Record<string, unknown>): string {
  switch (entry.type) {
    case "message": {
      const message = record(entry.message);
      const role = typeof message.role === "string" ? message.role : "message";
      const name = role === "toolResult" && typeof message.toolName === "string" ? ` ${message.toolName}` : "";
      const body = contentText(message.content) || stringField(message, "command") || stringField(message, "summary");
      return `${role}${name}: ${body}`;
    }
    case "compaction":
    case "branch_summary":
      return `${entry.type.replace("_", " ")}: ${stringField(entry, "summary")}`;
    case "custom_message":
      return `${stringField(entry, "customType") || "custom message"}: ${contentText(entry.content)}`;
    case "label":
      return `label ${stringField(entry, "targetId")}: ${stringField(entry, "label") || "(cleared)"}`;
    case "model_change":
      return `model: ${stringField(entry, "provider")}/${stringField(entry, "modelId")}`;
    case "thinking_level_change":
      return `thinking level: ${stringField(entry, "thinkingLevel")}`;
    case "session_info":
      return `session name: ${stringField(entry, "name")}`;
    case "context_edit":
      return `context edit of ${stringField(entry, "targetId")}`;
    default:
      return typeof entry.type === "string" ? entry.type.replace(/_/g, " ") : "entry";
  }
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((block) => {
      const part = record(block);
      if (part.type === "text") return stringField(part, "text");
      if (part.type === "toolCall") return `[${stringField(part, "name") || "tool"} call]`;
      if (part.type === "image") return "[image]";
      return "";
    })
    .filter(Boolean)
    .join(" ");
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
}

function stringField(value: Record<string, unknown>, key: string): string {
  const field = value[key];
  return typeof field === "string" ? field : "";
}
