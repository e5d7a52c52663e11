// The generated protocol types: in step with protocol/schema.json, and the generator itself.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { splitCommandLine } from "@sessiond/client";

const packageRoot = join(__dirname, "..", "..");

interface Generator {
  generateTypes(schema: unknown): string;
  generateFromFile(path?: string): string;
  typeOf(node: unknown): string;
  schemaPath: string;
  outputPath: string;
}

// The generator is an ES module run by `npm run generate`; tests load the same file.
const loadGenerator = () => import(join(packageRoot, "scripts", "generate-types.mjs")) as Promise<Generator>;

describe("generated protocol types", () => {
  it("are up to date with protocol/schema.json (run `npm run generate` if not)", async () => {
    const generator = await loadGenerator();
    const checkedIn = readFileSync(generator.outputPath, "utf8");
    assert.ok(checkedIn === generator.generateFromFile(), "src/generated/protocol.ts is stale: run `npm run generate`");
  });

  it("has a --check mode that fails once the schema changes", () => {
    const script = join(packageRoot, "scripts", "generate-types.mjs");
    const dir = mkdtempSync(join(tmpdir(), "sessiond-gen-"));
    try {
      const schema = join(dir, "schema.json");
      const out = join(dir, "protocol.ts");
      const original = JSON.parse(readFileSync(join(packageRoot, "..", "..", "protocol", "schema.json"), "utf8"));
      writeFileSync(schema, JSON.stringify(original));
      execFileSync(process.execPath, [script, "--schema", schema, "--out", out]);
      const check = () =>
        spawnSync(process.execPath, [script, "--check", "--schema", schema, "--out", out], { encoding: "utf8" });
      assert.equal(check().status, 0);
      original.$defs.Usage.properties.newField = { type: "string" };
      writeFileSync(schema, JSON.stringify(original));
      const stale = check();
      assert.equal(stale.status, 1);
      assert.match(stale.stderr, /stale/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("maps the schema constructs the daemon uses", async () => {
    const { typeOf, generateTypes } = await loadGenerator();
    assert.equal(typeOf({ anyOf: [{ type: "string" }, { type: "null" }] }), "string | null");
    assert.equal(typeOf({ anyOf: [{}, { type: "null" }] }), "unknown");
    // Tagged unions (entries on `type`, messages on `role`) and a typed free-form object.
    const tagged = { oneOf: [{ $ref: "#/$defs/A" }, { $ref: "#/$defs/B" }] };
    assert.equal(typeOf(tagged), "A | B");
    assert.equal(typeOf({ type: "array", items: tagged }), "(A | B)[]");
    assert.equal(typeOf({ enum: ["assistant"] }), '"assistant"');
    assert.equal(typeOf({ const: "assistant" }), '"assistant"');
    assert.equal(typeOf({ $ref: "#/$defs/EntryInput", type: "object" }), "EntryInput");
    assert.equal(typeOf({ enum: ["agent", "llm"] }), '"agent" | "llm"');
    assert.equal(typeOf({ type: "array", items: { enum: ["a", "b"] } }), '("a" | "b")[]');
    assert.equal(typeOf({ type: "array" }), "unknown[]");
    assert.equal(typeOf({ type: "object", additionalProperties: { type: "boolean" } }), "Record<string, boolean>");
    assert.equal(typeOf({ $ref: "#/$defs/Usage" }), "Usage");
    assert.throws(() => typeOf({ type: "tuple" }), /unsupported/);

    const out = generateTypes({
      protocolVersion: "9",
      messages: [
        { method: "x/do", kind: "request", direction: "clientToServer", params: "P", result: "N" },
        { method: "c/note", kind: "notification", direction: "clientToServer", params: null },
        { method: "$/both", kind: "notification", direction: "both", params: "P" },
        { method: "n/plain", kind: "notification", direction: "serverToClient", params: "P" },
        { method: "hooks/h", kind: "notification", direction: "serverToClient", params: "P", hook: "h" },
        {
          method: "hooks/r",
          kind: "request",
          direction: "serverToClient",
          params: "P",
          result: "P",
          hook: "r",
          resultMayBeNull: true,
        },
      ],
      $defs: {
        N: { type: "null" },
        P: {
          type: "object",
          description: "Params.",
          properties: { id: { type: "string" }, "odd-name": { type: "integer", default: 3 } },
          required: ["id"],
        },
      },
    });
    assert.match(out, /export const PROTOCOL_VERSION = "9";/);
    assert.match(
      out,
      /\/\*\* Params\. \*\/\nexport interface P \{\n  id: string;\n  \/\*\* @default 3 \*\/\n  "odd-name"\?: number;\n\}/,
    );
    assert.match(out, /"x\/do": \{ params: P; result: N \};/);
    assert.match(out, /export type N = null;/);
    assert.match(out, /export interface Notifications \{\n  "n\/plain": P;\n\}/);
    assert.match(out, /export interface ServerNotifications \{\n  "hooks\/h": P;\n\}/);
    assert.match(out, /export interface ServerRequests \{\n  "hooks\/r": \{ params: P; result: P \| null \};\n\}/);
    assert.match(out, /export interface ClientNotifications \{\n  "\$\/both": P;\n  "c\/note": undefined;\n\}/);
  });
});

describe("splitCommandLine", () => {
  it("splits like a shell without expanding anything", () => {
    assert.deepEqual(splitCommandLine("python -m sessiond serve --stdio"), [
      "python",
      "-m",
      "sessiond",
      "serve",
      "--stdio",
    ]);
    assert.deepEqual(splitCommandLine(`"/opt/my venv/bin/python"  -m 'sessiond' a\\ b ""`), [
      "/opt/my venv/bin/python",
      "-m",
      "sessiond",
      "a b",
      "",
    ]);
    assert.deepEqual(splitCommandLine(`say "a \\"quoted\\" word" $HOME`), ["say", 'a "quoted" word', "$HOME"]);
    assert.throws(() => splitCommandLine(`broken "quote`), /unterminated/);
  });
});
