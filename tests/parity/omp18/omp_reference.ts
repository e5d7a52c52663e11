#!/usr/bin/env bun
// What oh-my-pi 18.3.4 itself makes of session files: it opens each one as it resumes a
// session (SessionManager.open, on a private copy: the file given is never touched) and
// builds the model context at the leaves asked for, the way /tree navigation does
// (branch(leaf), then buildSessionContext()).
//
//   bun --no-install omp_reference.ts < JOBS.json
//
// JOBS: [{"file": PATH, "leaves": "all" | [ID or null, ...]}]; "all" is every entry and
// null (before the first entry). A job {"titleSlot": {title, source?, updatedAt}} asks for
// the title line oh-my-pi writes for that name ({"line": ...}). Prints one JSON array, an
// answer per job:
//   {file, ok, error?, header, sessionName, leafId, entries: [{id, parentId, type}],
//    labels: {id: label}, tree: {rootIds, children: {id: [ids]}}, unchangedByOpen,
//    contexts: {LEAF or "null": {messages, thinkingLevel, models, lastModelChangeRole,
//                                 model: {provider, modelId} | null, llmRoles}}}
// `llmRoles` are the roles of oh-my-pi's provider form of the context (convertToLlm).
// `model` is the model oh-my-pi restores on resume: the first of
// getRestorableSessionModels(models, lastModelChangeRole), split at its first "/".
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { load, readJsonStdin, requireIsolation, sessionModules, writeStdout } from "./omp_runtime.ts";

requireIsolation();
const omp = await sessionModules();
const { convertToLlm } = await load("@oh-my-pi/pi-coding-agent/session/messages");

function splitModel(selector: string | undefined): { provider: string; modelId: string } | null {
	if (!selector) return null;
	const slash = selector.indexOf("/");
	return slash > 0 ? { provider: selector.slice(0, slash), modelId: selector.slice(slash + 1) } : null;
}

function treeOf(roots: any[]): { rootIds: string[]; children: Record<string, string[]> } {
	const children: Record<string, string[]> = {};
	const stack = [...roots];
	while (stack.length > 0) {
		const node = stack.pop();
		children[node.entry.id] = node.children.map((child: any) => child.entry.id);
		stack.push(...node.children);
	}
	return { rootIds: roots.map(node => node.entry.id), children };
}

async function answer(file: string, leaves: "all" | (string | null)[]): Promise<any> {
	const scratch = mkdtempSync(join(tmpdir(), "omp-reference-"));
	const copy = join(scratch, basename(file));
	const result: any = { file, ok: false };
	let manager: any;
	try {
		copyFileSync(file, copy);
		const before = readFileSync(copy);
		manager = await omp.SessionManager.open(copy, scratch, undefined, { suppressBreadcrumb: true });
		result.unchangedByOpen = before.equals(readFileSync(copy));
		const header = manager.getHeader();
		const entries = manager.getEntries();
		result.header = { id: header?.id, version: header?.version, title: header?.title, titleSource: header?.titleSource };
		result.sessionName = manager.getSessionName() ?? null;
		result.leafId = manager.getLeafId();
		result.entries = entries.map((entry: any) => ({ id: entry.id, parentId: entry.parentId, type: entry.type }));
		result.labels = {};
		for (const entry of entries) {
			const label = manager.getLabel(entry.id);
			if (label !== undefined) result.labels[entry.id] = label;
		}
		result.tree = treeOf(manager.getTree());
		const wanted = leaves === "all" ? [...entries.map((entry: any) => entry.id), null] : leaves;
		result.contexts = {};
		for (const leaf of wanted) {
			if (leaf === null) manager.resetLeaf();
			else manager.branch(leaf);
			const context = manager.buildSessionContext();
			const role = manager.getLastModelChangeRole();
			const restorable: string[] = omp.context.getRestorableSessionModels(context.models, role);
			result.contexts[leaf ?? "null"] = JSON.parse(
				JSON.stringify({
					messages: context.messages,
					thinkingLevel: context.thinkingLevel,
					models: context.models,
					lastModelChangeRole: role ?? null,
					model: splitModel(restorable[0]),
					llmRoles: convertToLlm(context.messages).map((message: any) => message.role),
				}),
			);
		}
		result.ok = true;
	} catch (error: any) {
		result.error = `${error?.name ?? "Error"}: ${error?.message ?? error}`;
	} finally {
		if (manager) await manager.close().catch(() => {});
		rmSync(scratch, { recursive: true, force: true });
	}
	return result;
}

const slots = await load("@oh-my-pi/pi-coding-agent/session/session-title-slot");
const jobs = await readJsonStdin();
const answers = [];
for (const job of jobs) {
	if (job.titleSlot) answers.push({ ok: true, line: slots.serializeTitleSlot(job.titleSlot) });
	else answers.push(await answer(job.file, job.leaves ?? "all"));
}
await writeStdout(`${JSON.stringify(answers)}\n`);
process.exit(0);
