// protocol/examples (recorded daemon traffic) against the schema the types come from:
// whatever the daemon sends there, this client knows the method and the shape.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { NOTIFICATION_NAMES, SERVER_NOTIFICATION_NAMES, SERVER_REQUEST_NAMES } from "@sessiond/client";

const protocolDir = join(__dirname, "..", "..", "..", "..", "protocol");
const schema = JSON.parse(readFileSync(join(protocolDir, "schema.json"), "utf8"));
// JSON-RPC's own cancellation: the client handles it itself (the schema lists it as "both").
const LSP_NOTIFICATIONS = ["$/cancelRequest"];

interface Row {
  method: string;
  kind: string;
  direction: string;
  params?: string | null;
  result?: string;
  resultMayBeNull?: boolean;
}
/** The schema node of a message's params or result, from the `messages` table. */
function node(method: string, sender: "client" | "daemon", part: "params" | "result") {
  const row = (schema.messages as Row[]).find(
    (r) => r.method === method && (r.direction === "both" || r.direction === (sender === "client" ? "clientToServer" : "serverToClient")),
  );
  const name = row?.[part];
  if (!row || !name) return undefined;
  const ref = { $ref: `#/$defs/${name}` };
  return part === "result" && row.resultMayBeNull ? { anyOf: [ref, { type: "null" }] } : ref;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Problems of `value` against a schema node; examples write placeholders such as "<integer>". */
function problems(value: Json | undefined, node: Record<string, unknown> | undefined, at: string): string[] {
  if (!node || value === undefined) return [];
  if (typeof value === "string" && /^<[^>]+>/.test(value)) return [];
  if (typeof node.$ref === "string") return problems(value, schema.$defs[node.$ref.replace("#/$defs/", "")], at);
  const members = (node.anyOf ?? node.oneOf) as Record<string, unknown>[] | undefined;
  if (Array.isArray(members)) {
    const each = members.map((member) => problems(value, member, at));
    return each.some((p) => p.length === 0) ? [] : each.flat();
  }
  if ("const" in node)
    return node.const === value ? [] : [`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(node.const)}`];
  if (Array.isArray(node.enum))
    return node.enum.includes(value)
      ? []
      : [`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(node.enum)}`];
  const type = node.type as string | undefined;
  const actual = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const fits =
    type === undefined ||
    type === actual ||
    (type === "integer" && typeof value === "number" && Number.isInteger(value)) ||
    (type === "number" && typeof value === "number");
  if (!fits) return [`${at}: expected ${type}, got ${actual}`];
  if (type === "array" && Array.isArray(value) && node.items) {
    return value.flatMap((item, i) => problems(item, node.items as Record<string, unknown>, `${at}[${i}]`));
  }
  if (type === "object" && actual === "object") {
    const object = value as Record<string, Json>;
    const properties = (node.properties ?? {}) as Record<string, Record<string, unknown>>;
    // `"...": "..."` marks an abridged object in the examples: its absent fields are not missing.
    const abridged = "..." in object;
    const missing = abridged
      ? []
      : ((node.required ?? []) as string[]).filter((key) => !(key in object)).map((key) => `${at}.${key}: missing`);
    return [
      ...missing,
      ...Object.entries(properties).flatMap(([key, sub]) => problems(object[key], sub, `${at}.${key}`)),
    ];
  }
  return [];
}

interface Step {
  direction: string;
  peer?: string;
  message?: { id?: number | string; method?: string; params?: Json; result?: Json; error?: Json };
}

describe("protocol/examples", () => {
  const files = readdirSync(join(protocolDir, "examples")).filter((f) => f.endsWith(".json"));

  it("exist", () => assert.ok(files.length > 0, "protocol/examples has no example"));

  it("only show daemon messages this client knows, shaped as the schema says", () => {
    const found: string[] = [];
    let checked = 0;
    for (const file of files) {
      const steps = (JSON.parse(readFileSync(join(protocolDir, "examples", file), "utf8")) as { messages: Step[] })
        .messages;
      // Requests by (peer, id), to find the method an answer belongs to.
      const sent = new Map<string, string>();
      const asked = new Map<string, string>();
      for (const step of steps) {
        const message = step.message;
        if (!message) continue;
        const key = `${step.peer ?? ""}/${String(message.id)}`;
        if (step.direction === "send" && message.method && message.id !== undefined) sent.set(key, message.method);
        if (step.direction === "receive" && message.method) {
          const where = `${file}: ${message.method}`;
          if (message.id !== undefined) {
            asked.set(key, message.method);
            if (!(SERVER_REQUEST_NAMES as readonly string[]).includes(message.method))
              found.push(`${where}: unknown server request`);
            found.push(...problems(message.params, node(message.method, "daemon", "params"), where));
          } else {
            const known = [...NOTIFICATION_NAMES, ...SERVER_NOTIFICATION_NAMES, ...LSP_NOTIFICATIONS] as string[];
            if (!known.includes(message.method)) found.push(`${where}: unknown notification`);
            found.push(...problems(message.params, node(message.method, "daemon", "params"), where));
          }
          checked++;
        }
        if (message.result !== undefined && message.id !== undefined) {
          if (step.direction === "receive" && sent.has(key)) {
            const method = sent.get(key)!;
            found.push(...problems(message.result, node(method, "client", "result"), `${file}: result of ${method}`));
            checked++;
          }
          if (step.direction === "send" && asked.has(key)) {
            const method = asked.get(key)!;
            found.push(
              ...problems(message.result, node(method, "daemon", "result"), `${file}: answer to ${method}`),
            );
            checked++;
          }
        }
      }
    }
    assert.deepEqual(found, []);
    assert.ok(checked > 50, `only ${checked} messages checked`);
  });
});
