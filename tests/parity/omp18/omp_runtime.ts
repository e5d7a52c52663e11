// Loads oh-my-pi 18.3.4's own modules from its published bundle (see README.md and
// install.sh): nothing of oh-my-pi is copied into this repository.
//
// The bundle starts oh-my-pi's command line only when it is Bun's main module, so
// importing it just sets it up. It keeps a table of its modules by source path, the one
// its extension loader uses ("@oh-my-pi/pi-coding-agent/session/session-manager" ->
// a loader); the one line install.sh appends exports that table.
//
// oh-my-pi writes under the home directory (~/.omp: breadcrumbs, a history database, an
// image blob store). The Python side runs these scripts with HOME, the XDG directories and
// PI_CODING_AGENT_DIR in a temporary directory and says so in OMP_PARITY_ISOLATED; a
// script refuses to start without it rather than touch the real home.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const OMP_VERSION = "18.3.4";
const BUNDLE = join(import.meta.dir, ".cache", `omp-${OMP_VERSION}.mjs`);

type ModuleTable = Record<string, () => Promise<any>>;
let table: Promise<ModuleTable> | undefined;

export function requireIsolation(): void {
	if (process.env.OMP_PARITY_ISOLATED !== "1") {
		process.stderr.write(
			"run with HOME, XDG_* and PI_CODING_AGENT_DIR in a scratch directory and OMP_PARITY_ISOLATED=1 " +
				"(tests/parity/omp_reference.py does): oh-my-pi writes into the home directory\n",
		);
		process.exit(2);
	}
}

export async function load(specifier: string): Promise<any> {
	table ??= (async () => {
		if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run install.sh beside this file`);
		const bundle = await import(pathToFileURL(BUNDLE).href);
		return bundle.__sessiondModules() as ModuleTable;
	})();
	const loader = (await table)[specifier];
	if (!loader) throw new Error(`oh-my-pi's bundle has no module ${specifier}`);
	return loader();
}

export async function sessionModules() {
	const [manager, context, compaction] = await Promise.all([
		load("@oh-my-pi/pi-coding-agent/session/session-manager"),
		load("@oh-my-pi/pi-coding-agent/session/session-context"),
		load("@oh-my-pi/pi-agent-core/compaction"),
	]);
	return { SessionManager: manager.SessionManager, context, compaction };
}

/** Everything on stdin, parsed as JSON. */
export async function readJsonStdin(): Promise<any> {
	return JSON.parse(await Bun.stdin.text());
}

/** Write TEXT to stdout and wait until it is out (a pipe is written asynchronously). */
export function writeStdout(text: string): Promise<void> {
	return new Promise(resolve => process.stdout.write(text, () => resolve()));
}
