/**
 * Text from a session (entry previews, labels, names, first messages, paths, the
 * daemon's messages quoting them) made inert before VS Code shows it.
 *
 * A session file may hold line breaks, terminal escapes or bidirectional overrides in
 * any string: shown as they are, they break a row into several, or show text other than
 * what is there. Each such character is spelled as an escape (`\n`, `\u001b`, `\u202e`).
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

export function inert(text: string): string {
  return text.replace(CONTROLS, (c) => {
    if (c === "\n") return "\\n";
    if (c === "\t") return "\\t";
    if (c === "\r") return "\\r";
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}

/**
 * For the places that render `$(icon)` syntax (quick pick items): also keeps a file's text
 * from showing VS Code's icons, which would let it pass for the extension's own items.
 */
export function pickText(text: string): string {
  return inert(text).replace(/\$\(/g, "$\u200b(");
}
