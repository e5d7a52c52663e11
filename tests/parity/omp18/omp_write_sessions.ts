#!/usr/bin/env bun
// Writes session files with oh-my-pi 18.3.4's own SessionManager, for the parity tests:
// what an oh-my-pi user's sessions hold, entry types and shapes as oh-my-pi writes them.
//
//   bun --no-install omp_write_sessions.ts OUT_DIR [RANDOM.json]
//
// Prints [{"name", "path"}] on stdout. RANDOM.json, when given, adds sessions made of
// operations ({"name": [[op, ...args], ...]}, see `replay` below) that tests generate.
// The scenarios:
//   turns        tool calls and their results, failed, aborted and empty error turns, a
//                retried turn, a dangling tool call, model changes by role (default, smol,
//                fallback), thinking levels (null included), custom messages (the types
//                oh-my-pi keeps out of the context too, an interrupted-thinking note),
//                usage side entries, the metadata types, an image big enough for the blob
//                store, labels, title changes (auto, user, and an auto one it refuses)
//   compactions  compactions with shortSummary/tokensAfter/method/details, a handoff, a
//                notes-backed rollover, an OpenAI remote replay payload, an Anthropic one,
//                one whose kept entry is missing; branch summaries (from an entry, from
//                the root, an empty one); branches
//   clear        /clear boundaries before and after compactions, context notes around
//                them (a valid one, an invalid one, an emptied one)
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requireIsolation, sessionModules, writeStdout } from "./omp_runtime.ts";

requireIsolation();
const omp = await sessionModules();
const out = process.argv[2];
if (!out) {
	process.stderr.write("usage: bun --no-install omp_write_sessions.ts OUT_DIR\n");
	process.exit(2);
}
mkdirSync(out, { recursive: true });
const work = mkdtempSync(join(tmpdir(), "omp-write-"));

let clock = Date.UTC(2026, 8, 27, 9, 0, 0);
const now = () => (clock += 1500);

function usage(input: number, output: number, cacheRead = 0) {
	const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
	return { input, output, cacheRead, cacheWrite: 0, totalTokens: input + output + cacheRead, cost: zero };
}
const user = (text: string) => ({ role: "user", content: text, timestamp: now() });
function assistant(content: any[], extra: Record<string, unknown> = {}) {
	return {
		role: "assistant",
		content,
		api: "anthropic-messages",
		provider: "anthropic",
		model: "claude-sonnet-4-5",
		usage: usage(1200 + content.length * 300, 80),
		stopReason: content.some(block => block.type === "toolCall") ? "toolUse" : "stop",
		timestamp: now(),
		...extra,
	};
}
const text = (value: string) => ({ type: "text", text: value });
const call = (id: string, name: string, args: Record<string, unknown>) => ({ type: "toolCall", id, name, arguments: args });
const result = (id: string, name: string, output: string, isError = false) => ({
	role: "toolResult",
	toolCallId: id,
	toolName: name,
	content: [text(output)],
	isError,
	timestamp: now(),
});

async function scenario(name: string, write: (sm: any) => Promise<void> | void) {
	const sessions = join(work, name);
	const sm = omp.SessionManager.create(join(work, "project"), sessions);
	await write(sm);
	await sm.flush();
	const file = sm.getSessionFile();
	await sm.close();
	const path = join(out, `${name}.jsonl`);
	copyFileSync(file, path);
	return { name, path };
}

function turn(sm: any, ask: string, answer: string) {
	sm.appendMessage(user(ask));
	return sm.appendMessage(assistant([text(answer)]));
}

const written = [];

written.push(
	await scenario("turns", async sm => {
		await sm.setSessionName("Fix the slug helper", "auto");
		sm.appendModelChange("anthropic/claude-sonnet-4-5");
		sm.appendThinkingLevelChange("medium", "auto");
		const first = sm.appendMessage(user("The slug helper drops accents; fix it."));
		sm.appendMessage(
			assistant([
				{ type: "thinking", thinking: "Read the helper first.", thinkingSignature: "sig-1" },
				call("call-read", "read", { path: "src/slug.py" }),
			]),
		);
		sm.appendMessage(result("call-read", "read", "def slug(s): return s.lower()"));
		const answered = sm.appendMessage(assistant([text("It lowercases only; I will normalize accents.")]));
		sm.appendModelUsage(
			{ purpose: "title", role: "smol", api: "openai-responses", provider: "openai", model: "gpt-5-mini", usage: usage(300, 12), stopReason: "stop" },
			{ sessionId: sm.getSessionId(), parentId: answered },
		);
		sm.appendLabelChange(first, "start");
		// A turn that failed after its tool call ran: dropped with its result.
		sm.appendMessage(user("Run the tests."));
		sm.appendMessage(assistant([call("call-bash-1", "bash", { command: "pytest -q" })]));
		sm.appendMessage(result("call-bash-1", "bash", "1 failed", true));
		sm.appendMessage(
			assistant([text("The test"), call("call-bash-2", "bash", { command: "pytest -x" })], {
				stopReason: "error",
				errorMessage: "overloaded_error",
			}),
		);
		sm.appendMessage(result("call-bash-2", "bash", "Tool execution was aborted", true));
		sm.appendMessage(assistant([], { stopReason: "error", errorMessage: "connection reset" }));
		sm.appendMessage(
			assistant([text("partial")], {
				stopReason: "error",
				errorMessage: "rate limited",
				retryRecovery: { kind: "auto-retry", status: "superseded", attempt: 1 },
			}),
		);
		sm.appendMessage(assistant([text("One test fails: accents are stripped.")]));
		sm.appendServiceTierChange({ openai: "priority" });
		sm.appendModeChange("plan", { planFile: "PLAN.md" });
		sm.appendTtsrInjection(["no-print-debugging"]);
		sm.appendCredentialPin("anthropic", "0f".repeat(32));
		sm.appendCustomEntry("editor-state", { cursor: 12 });
		sm.appendModelChange("openai/gpt-5-mini", "smol");
		sm.appendThinkingLevelChange(undefined);
		// An aborted turn with a tool call, kept because an interrupted-thinking note follows.
		sm.appendMessage(user("Try unicodedata."));
		sm.appendMessage(
			assistant([{ type: "thinking", thinking: "Maybe NFKD" }, call("call-edit", "edit", { path: "src/slug.py" })], {
				stopReason: "aborted",
			}),
		);
		sm.appendMessage(result("call-edit", "edit", "aborted", true));
		sm.appendCustomMessageEntry("interrupted-thinking", "The user interrupted you while thinking.", false);
		// A dangling tool call: only one of two calls has a result on this path.
		sm.appendMessage(
			assistant([
				{ type: "redactedThinking", data: "opaque" },
				{ type: "thinking", thinking: "two reads", thinkingSignature: "sig-2" },
				call("call-a", "read", { path: "a.py" }),
				call("call-b", "read", { path: "b.py" }),
			]),
		);
		sm.appendMessage(result("call-a", "read", "print('a')"));
		sm.appendMessage(assistant([call("call-lonely", "read", { path: "c.py" })]));
		sm.appendCustomMessageEntry("prewalk-plan", "plan: 1. edit 2. test", false);
		sm.appendCustomMessageEntry("vibe-mode-context", "vibe", false);
		sm.appendCustomMessageEntry("review-note", [text("Looks fine.")], true, { reviewer: "bot" }, "user");
		sm.appendCustomMessageEntry("custom-message", "no attribution given", true, undefined, undefined);
		sm.appendModelChange("openai/gpt-5", "fallback", true);
		const picture = Buffer.alloc(2048, 7).toString("base64");
		sm.appendMessage({
			role: "user",
			content: [text("This is the broken page:"), { type: "image", data: picture, mimeType: "image/png" }],
			timestamp: now(),
		});
		sm.appendMessage({ role: "user", content: [{ type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], timestamp: now() });
		sm.appendMessage(assistant([text("I see the page.")]));
		await sm.setSessionName("Slug helper: keep accents", "user");
		await sm.setSessionName("An automatic title", "auto");
		sm.appendLabelChange(first, undefined);
		sm.appendLabelChange(answered, "explained");
	}),
);

written.push(
	await scenario("compactions", async sm => {
		sm.appendModelChange("anthropic/claude-sonnet-4-5");
		const ids: string[] = [];
		for (let i = 0; i < 4; i++) ids.push(turn(sm, `Step ${i}: change module ${i}.`, `Changed module ${i}.`));
		const firstKept = sm.getBranch().at(-4).id;
		sm.appendCompaction("## Goal\nChange four modules.", "Four modules changed", firstKept, 6400, {
			details: { readFiles: ["a.py"], modifiedFiles: ["b.py"] },
			tokensAfter: 2100,
			method: "soft",
		});
		for (let i = 4; i < 6; i++) turn(sm, `Step ${i}.`, `Done ${i}.`);
		const branchPoint = ids[1];
		sm.branchWithSummary(branchPoint, "Tried a rewrite of module 3; abandoned.", { readFiles: [], modifiedFiles: ["c.py"] }, false);
		turn(sm, "Back here: just rename module 2.", "Renamed.");
		const afterBranch = turn(sm, "And module 1.", "Renamed too.");
		sm.appendCompaction("Handoff: modules renamed; next, tests.", "Renames done", afterBranch, 9000, {
			method: "handoff",
			tokensAfter: 400,
		});
		turn(sm, "Write the tests.", "Wrote them.");
		const rollKept = turn(sm, "Run them.", "They pass.");
		sm.appendMessage(user("Now the docs, please, keep it short."));
		const docsAnswer = sm.appendMessage(assistant([text("Docs updated.")]));
		sm.appendCompaction("Rolled over: tests pass, docs in progress.", undefined, docsAnswer, 5000, {
			details: { kind: "experimental-context-rollover" },
		});
		turn(sm, "Ship it.", "Shipped.");
		const replayed = turn(sm, "Summarize the release.", "Release notes drafted.");
		turn(sm, "Add the date.", "Dated.");
		sm.appendCompaction("Remote compaction preserved provider-native history.", undefined, "", 12000, {
			method: "remote",
			providerReplayThroughEntryId: replayed,
			preserveData: {
				openaiRemoteCompaction: {
					provider: "openai",
					replacementHistory: [{ type: "message", role: "user", content: [{ type: "input_text", text: "earlier" }] }],
				},
			},
		});
		turn(sm, "One more thing.", "Sure.");
		const anthropicKept = turn(sm, "Check the changelog.", "Checked.");
		sm.appendCompaction("Anthropic summary.", "native", anthropicKept, 7000, {
			details: { readFiles: ["CHANGELOG.md"], modifiedFiles: [] },
			fromExtension: false,
			tokensAfter: 900,
			preserveData: { anthropicCompaction: { provider: "anthropic", content: "native summary", usedTokens: 7000 } },
		});
		turn(sm, "Tag the release.", "Tagged.");
		sm.branchWithSummary(null, "Explored a different plan from the very start.");
		turn(sm, "Start over: only docs.", "Docs only then.");
		const lost = turn(sm, "Which docs?", "The README.");
		sm.appendCompaction("Summary whose kept entry does not exist.", undefined, "00000000", 300, {});
		turn(sm, "Go on.", "Going on.");
		sm.branch(lost);
		sm.branchWithSummary(lost, "", { kind: "discarded-entry-branch", discardedEntryId: "deadbeef" });
		turn(sm, "After the discard.", "Noted.");
		await sm.setSessionName("Release work", "user");
	}),
);

written.push(
	await scenario("clear", async sm => {
		sm.appendModelChange("anthropic/claude-sonnet-4-5");
		sm.appendThinkingLevelChange("high");
		turn(sm, "First question.", "First answer.");
		sm.appendCustomEntry("experimental_context_notes", { version: 1, text: "- task: rename\n- blocked: none" });
		turn(sm, "Second question.", "Second answer.");
		sm.appendResetBoundary();
		turn(sm, "After clear.", "Fresh start.");
		sm.appendCustomEntry("experimental_context_notes", { version: 1, text: "- task: docs" });
		const kept = turn(sm, "More after clear.", "More.");
		turn(sm, "Even more.", "Even more answered.");
		sm.appendCompaction("Compacted after the clear.", "after clear", kept, 4000, {});
		turn(sm, "After the compaction.", "Yes.");
		sm.appendCustomEntry("experimental_context_notes", { version: 1, text: "extra", other: true });
		sm.appendResetBoundary();
		turn(sm, "After the second clear.", "Clean again.");
		sm.appendCustomEntry("experimental_context_notes", { version: 1, text: "" });
		turn(sm, "Notes emptied.", "Fine.");
		const again = turn(sm, "Compact again.", "Ok.");
		sm.appendCompaction("Second compaction, after the second clear.", undefined, again, 3000, {});
		turn(sm, "Last.", "Last answer.");
	}),
);

/** One generated operation, applied through the SessionManager's own methods. Indices
 * pick among the entries so far (`branch`, `label`) or along the current path. */
function replay(sm: any, op: any[]) {
	const [kind, ...args] = op;
	const ids = sm.getEntries().map((entry: any) => entry.id);
	const path = sm.getBranch().map((entry: any) => entry.id);
	const pick = (list: string[], index: number) => list[index % list.length];
	switch (kind) {
		case "message":
			sm.appendMessage({ ...args[0], timestamp: now() });
			break;
		case "branch":
			if (ids.length) sm.branch(pick(ids, args[0]));
			break;
		case "resetLeaf":
			sm.resetLeaf();
			break;
		case "clear":
			sm.appendResetBoundary();
			break;
		case "compaction": {
			if (!path.length) break;
			const [summary, shortSummary, keptIndex, tokensBefore, options] = args;
			const { replayIndex, keptEmpty, ...rest } = options;
			if (replayIndex !== undefined) rest.providerReplayThroughEntryId = pick(path, replayIndex);
			sm.appendCompaction(summary, shortSummary ?? undefined, keptEmpty ? "" : pick(path, keptIndex), tokensBefore, rest);
			break;
		}
		case "thinking":
			sm.appendThinkingLevelChange(args[0] ?? undefined, args[0] ?? undefined);
			break;
		case "model":
			sm.appendModelChange(args[0], args[1] ?? undefined);
			break;
		case "custom":
			sm.appendCustomEntry(args[0], args[1]);
			break;
		case "customMessage":
			sm.appendCustomMessageEntry(args[0], args[1], args[2], undefined, args[3] ?? undefined);
			break;
		case "branchSummary":
			sm.branchWithSummary(sm.getLeafId(), args[0], undefined, false);
			break;
		case "label":
			if (ids.length) sm.appendLabelChange(pick(ids, args[0]), args[1] ?? undefined);
			break;
		default:
			throw new Error(`unknown operation ${kind}`);
	}
}

if (process.argv[3]) {
	const generated = JSON.parse(await Bun.file(process.argv[3]).text());
	for (const [name, ops] of Object.entries(generated) as [string, any[][]][]) {
		written.push(
			await scenario(name, sm => {
				for (const op of ops) replay(sm, op);
			}),
		);
	}
}

await writeStdout(`${JSON.stringify(written)}\n`);
rmSync(work, { recursive: true, force: true });
process.exit(0);
