#!/usr/bin/env node
// @ts-check
// Generates src/generated/protocol.ts from the daemon's protocol/schema.json.
//
// Written by hand instead of using json-schema-to-typescript: the schema uses a
// small subset of JSON Schema (objects, arrays, anyOf, oneOf, enum, const, $ref
// into $defs), and what the client most needs from it is outside JSON Schema
// proper: the `messages` table, which becomes typed method maps. A hundred lines with no dependencies also keep the output stable
// across upgrades of a formatter nobody asked for.
//
//   node scripts/generate-types.mjs           write the file
//   node scripts/generate-types.mjs --check   exit 1 when the file is stale
//   --schema PATH / --out PATH                other files than the repository's

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const packageRoot = join(here, "..");
export const schemaPath = join(packageRoot, "..", "..", "protocol", "schema.json");
export const outputPath = join(packageRoot, "src", "generated", "protocol.ts");

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** @param {string} name */
function propertyKey(name) {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

/** @param {string} ref */
function refName(ref) {
  const prefix = "#/$defs/";
  if (!ref.startsWith(prefix)) throw new Error(`unsupported $ref ${ref}`);
  const name = ref.slice(prefix.length);
  if (!IDENTIFIER.test(name)) throw new Error(`$ref ${ref} is not a TypeScript identifier`);
  return name;
}

/**
 * The TypeScript type of a schema node, on one line (nested objects inline).
 * @param {any} node
 * @returns {string}
 */
export function typeOf(node) {
  if (node === true || node === undefined) return "unknown";
  if (node === false) return "never";
  if (node.$ref) return refName(node.$ref);
  if (node.enum) return node.enum.map((/** @type {unknown} */ v) => JSON.stringify(v)).join(" | ");
  if ("const" in node) return JSON.stringify(node.const);
  if (node.anyOf || node.oneOf) {
    const members = (node.anyOf ?? node.oneOf).map(typeOf);
    // `unknown | null` is `unknown`; saying so keeps the output honest and short.
    if (members.includes("unknown")) return "unknown";
    return [...new Set(members)].map(parenthesize).join(" | ");
  }
  switch (node.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return node.items === undefined ? "unknown[]" : `${parenthesize(typeOf(node.items))}[]`;
    case "object":
      return objectType(node);
    case undefined:
      return "unknown";
    default:
      throw new Error(`unsupported schema type ${JSON.stringify(node.type)}`);
  }
}

/** @param {string} type */
function parenthesize(type) {
  return / \| /.test(type) && !type.startsWith("{") ? `(${type})` : type;
}

/** @param {any} node */
function objectType(node) {
  const properties = node.properties ?? {};
  const names = Object.keys(properties);
  const extra = node.additionalProperties;
  if (names.length === 0) {
    return `Record<string, ${extra && extra !== true ? typeOf(extra) : "unknown"}>`;
  }
  const required = new Set(node.required ?? []);
  const fields = names.map(
    (name) => `${propertyKey(name)}${required.has(name) ? "" : "?"}: ${typeOf(properties[name])}`,
  );
  return `{ ${fields.join("; ")} }`;
}

/**
 * @param {string} text
 * @param {string} indent
 */
function docComment(text, indent) {
  const lines = text
    .trim()
    .split("\n")
    .map((line) => line.trimEnd().replace(/\*\//g, "*\\/"));
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((line) => `${indent} *${line ? ` ${line}` : ""}`).join("\n")}\n${indent} */\n`;
}

/** @param {any} node */
function fieldDoc(node) {
  const parts = [];
  if (node.description) parts.push(node.description);
  // The daemon omits fields whose value is the default, so readers need to know it.
  if ("default" in node) parts.push(`@default ${JSON.stringify(node.default)}`);
  return parts.join("\n");
}

/**
 * @param {string} name
 * @param {any} node
 */
function declaration(name, node) {
  let out = node.description ? docComment(node.description, "") : "";
  if (node.type === "object" && node.properties && Object.keys(node.properties).length > 0) {
    const required = new Set(node.required ?? []);
    out += `export interface ${name} {\n`;
    for (const [field, schema] of Object.entries(node.properties)) {
      const doc = fieldDoc(schema);
      if (doc) out += docComment(doc, "  ");
      out += `  ${propertyKey(field)}${required.has(field) ? "" : "?"}: ${typeOf(schema)};\n`;
    }
    return `${out}}\n`;
  }
  if (node.type === "object" && !node.additionalProperties) {
    // An object with no declared fields (NoParams): an interface keeps the name in errors.
    return `${out}export interface ${name} {}\n`;
  }
  return `${out}export type ${name} = ${typeOf(node)};\n`;
}

/**
 * @param {string} name
 * @param {Record<string, any>} table
 * @param {(entry: any) => string} render
 * @param {string} doc
 */
function methodMap(name, table, render, doc) {
  const keys = Object.keys(table).sort();
  let out = docComment(doc, "");
  out += `export interface ${name} {\n`;
  for (const key of keys) out += `  ${JSON.stringify(key)}: ${render(table[key])};\n`;
  return `${out}}\n`;
}

/** @param {string[]} keys */
function nameList(keys) {
  return keys
    .sort()
    .map((key) => `  ${JSON.stringify(key)},\n`)
    .join("");
}

/**
 * The TypeScript type named by a row of the schema's `messages` table.
 * @param {string | null | undefined} name
 */
function named(name) {
  return name === null || name === undefined ? "undefined" : refName(`#/$defs/${name}`);
}

/**
 * The whole generated module for a parsed schema.
 * @param {any} schema
 * @returns {string}
 */
export function generateTypes(schema) {
  const defs = schema.$defs ?? {};
  /** @type {any[]} */
  const rows = schema.messages ?? [];
  /** @param {(row: any) => boolean} keep */
  const table = (keep) => Object.fromEntries(rows.filter(keep).map((row) => [row.method, row]));
  const methods = table((row) => row.kind === "request" && row.direction === "clientToServer");
  const serverRequests = table((row) => row.kind === "request" && row.direction === "serverToClient");
  const notification = (/** @type {any} */ row) => row.kind === "notification" && row.direction === "serverToClient";
  // A notification with `hook` goes only to clients that declared that hook.
  const plainNotifications = table((row) => notification(row) && row.hook === undefined);
  const hookNotifications = table((row) => notification(row) && row.hook !== undefined);
  const clientNotifications = table((row) => row.kind === "notification" && row.direction !== "serverToClient");
  const hooks = [...new Set(rows.filter((row) => row.hook !== undefined).map((row) => String(row.hook)))].sort();
  const request = (/** @type {any} */ row) =>
    `{ params: ${named(row.params)}; result: ${named(row.result)}${row.resultMayBeNull ? " | null" : ""} }`;
  const chunks = [
    "// Generated by scripts/generate-types.mjs from protocol/schema.json: do not edit.\n" +
      "// Run `npm run generate` after the schema changes (a test fails while this file is stale).\n",
    `/** The protocol version these types describe. */\nexport const PROTOCOL_VERSION = ${JSON.stringify(schema.protocolVersion ?? "")};\n`,
  ];
  for (const name of Object.keys(defs).sort()) chunks.push(declaration(name, defs[name]));
  chunks.push(
    methodMap("Methods", methods, request, "Requests, client to daemon: params and result of each method."),
    methodMap(
      "Notifications",
      plainNotifications,
      (row) => named(row.params),
      "Notifications, daemon to client.",
    ),
    methodMap(
      "ServerRequests",
      serverRequests,
      request,
      "Requests, daemon to client: the hooks a client answers, and `llm/complete` (a hook may answer null).",
    ),
    methodMap(
      "ServerNotifications",
      hookNotifications,
      (row) => named(row.params),
      "Hook notifications, daemon to client, sent to clients that declared the hook.",
    ),
    methodMap(
      "ClientNotifications",
      clientNotifications,
      (row) => named(row.params),
      "Notifications, client to daemon (`$/cancelRequest` goes both ways; `exit` has no params).",
    ),
    "export type MethodName = keyof Methods;\n" +
      "export type NotificationName = keyof Notifications;\n" +
      "export type ServerRequestName = keyof ServerRequests;\n" +
      "export type ServerNotificationName = keyof ServerNotifications;\n" +
      "export type ClientNotificationName = keyof ClientNotifications;\n",
    `/** The hooks a client may declare in \`initialize\` (\`capabilities.hooks\`). */\nexport type HookName =\n${hooks
      .map((hook) => `  | ${JSON.stringify(hook)}`)
      .join("\n")};\n`,
    `export const METHOD_NAMES: readonly MethodName[] = [\n${nameList(Object.keys(methods))}];\n`,
    `export const NOTIFICATION_NAMES: readonly NotificationName[] = [\n${nameList(Object.keys(plainNotifications))}];\n`,
    `export const SERVER_REQUEST_NAMES: readonly ServerRequestName[] = [\n${nameList(Object.keys(serverRequests))}];\n`,
    `export const SERVER_NOTIFICATION_NAMES: readonly ServerNotificationName[] = [\n${nameList(Object.keys(hookNotifications))}];\n`,
  );
  return chunks.join("\n");
}

/** @param {string} path */
export function generateFromFile(path = schemaPath) {
  return generateTypes(JSON.parse(readFileSync(path, "utf8")));
}

/** @param {string} name */
function option(name) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

function main() {
  const output = option("--out") ?? outputPath;
  const generated = generateFromFile(option("--schema") ?? schemaPath);
  const shown = relative(process.cwd(), output);
  if (process.argv.includes("--check")) {
    let current = "";
    try {
      current = readFileSync(output, "utf8");
    } catch {
      // a missing file is stale too
    }
    if (current !== generated) {
      console.error(`${shown} is stale: run \`npm run generate\``);
      process.exit(1);
    }
    console.log(`${shown} is up to date`);
    return;
  }
  writeFileSync(output, generated);
  console.log(`wrote ${shown}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
