#!/usr/bin/env node
// Writes a session file with pi 0.73.1's own AgentSession, for tests that need lines pi
// wrote itself (tests/protocol validates them against protocol/schema.json).
//
//   node pi_write_session.mjs OUT.jsonl
//
// The model is pi-ai's faux provider (scripted answers, no network). The session holds
// every entry type pi writes: messages of each role pi persists (user with an image,
// assistant with thinking and a tool call, toolResult, bashExecution, custom), a thinking
// level change, a model change, a custom entry, a session name, a label, a compaction
// and a branch summary. Prints {"path", "entries"} on stdout.

import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fauxAssistantMessage, fauxText, fauxThinking, fauxToolCall, registerFauxProvider } from "@mariozechner/pi-ai";
import {
  AuthStorage,
  createAgentSession,
  createExtensionRuntime,
  ModelRegistry,
  SessionManager,
  SettingsManager,
} from "@mariozechner/pi-coding-agent";

const out = process.argv[2];
if (!out) {
  console.error("usage: node pi_write_session.mjs OUT.jsonl");
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), "pi-write-session-"));
try {
  const cwd = join(work, "project");
  const sessionDir = join(work, "sessions");
  mkdirSync(cwd, { recursive: true });
  writeFileSync(join(cwd, "notes.md"), "# Notes\n\n- fix the table of contents\n");

  const faux = registerFauxProvider({
    models: [
      { id: "faux-1", reasoning: true, input: ["text", "image"], contextWindow: 200000 },
      { id: "faux-2", input: ["text", "image"], contextWindow: 200000 },
    ],
  });
  const authStorage = AuthStorage.create(join(work, "auth.json"));
  authStorage.setRuntimeApiKey("faux", "not-a-real-key");
  const { session } = await createAgentSession({
    cwd,
    agentDir: join(work, "agent"),
    model: faux.getModel("faux-1"),
    thinkingLevel: "off",
    authStorage,
    modelRegistry: ModelRegistry.inMemory(authStorage),
    resourceLoader: {
      getExtensions: () => ({ extensions: [], errors: [], runtime: createExtensionRuntime() }),
      getSkills: () => ({ skills: [], diagnostics: [] }),
      getPrompts: () => ({ prompts: [], diagnostics: [] }),
      getThemes: () => ({ themes: [], diagnostics: [] }),
      getAgentsFiles: () => ({ agentsFiles: [] }),
      getSystemPrompt: () => "You are a test assistant.",
      getAppendSystemPrompt: () => [],
      extendResources: () => {},
      reload: async () => {},
    },
    tools: ["read", "bash"],
    sessionManager: SessionManager.create(cwd, sessionDir),
    settingsManager: SettingsManager.inMemory({ compaction: { enabled: false }, retry: { enabled: false } }),
  });
  const manager = session.sessionManager;

  faux.setResponses([
    fauxAssistantMessage([fauxThinking("The notes are in notes.md."), fauxToolCall("read", { path: "notes.md" })], {
      stopReason: "toolUse",
    }),
    fauxAssistantMessage("The notes ask to fix the table of contents."),
    fauxAssistantMessage([fauxText("That image is a single pixel.")]),
    fauxAssistantMessage("## Goal\nFix the table of contents.\n\n## Progress\nRead the notes."),
    fauxAssistantMessage("## Goal\nLook at an image.\n\n## Progress\nDescribed it."),
  ]);

  await session.prompt("Read notes.md and tell me what it asks.");
  const firstUser = manager.getEntries().find((e) => e.type === "message" && e.message.role === "user");
  session.setThinkingLevel("high");
  await session.setModel(faux.getModel("faux-2"));
  const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
  await session.prompt("What is in this image?", { images: [{ type: "image", data: pixel, mimeType: "image/png" }] });
  await session.executeBash("echo hello from bash");
  await session.sendCustomMessage({ customType: "reminder", content: "Remember the style guide.", display: true });
  manager.appendCustomEntry("extension-state", { counter: 1 });
  session.setSessionName("  schema sample  ");
  manager.appendLabelChange(firstUser.id, "start");
  await session.compact();
  const result = await session.navigateTree(firstUser.id, { summarize: true, label: "back to the start" });
  if (!result.summaryEntry) throw new Error("navigateTree wrote no branch summary");

  const files = readdirSync(sessionDir, { recursive: true }).filter((name) => String(name).endsWith(".jsonl"));
  if (files.length !== 1) throw new Error(`expected one session file, found ${files.length}`);
  copyFileSync(join(sessionDir, String(files[0])), out);
  session.dispose();
  faux.unregister();
  console.log(JSON.stringify({ path: out, entries: manager.getEntries().length }));
} finally {
  rmSync(work, { recursive: true, force: true });
}
