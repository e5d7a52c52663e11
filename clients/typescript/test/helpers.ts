// What only this package's tests need on top of @sessiond/client/testing: the repository's
// venv, the suite-wide daemon, and a few event utilities.
import { resolve } from "node:path";
import { after, before } from "node:test";
import { SessiondClient, type Event, type InitializeOptions } from "@sessiond/client";
import {
  SMALL_COMPACTION_SETTINGS,
  sessiondCommand,
  startSandboxedClient,
  type SandboxedClient,
} from "@sessiond/client/testing";

/** clients/typescript/build/test -> the repository root. */
export const repoRoot = resolve(__dirname, "..", "..", "..", "..");

/**
 * argv of the daemon: `$SESSIOND_COMMAND`, else the repository's venv (`$SESSIOND_VENV`,
 * default `.venv`, relative to the repository root) running `python -m sessiond serve`,
 * with `transport` instead of `--stdio` when given.
 */
export function daemonCommand(...transport: string[]): string[] {
  return sessiondCommand({ root: repoRoot, defaultVenv: ".venv", transport });
}

/** A client on its own sandboxed daemon, with the small compaction settings. */
export function startDaemon(options: InitializeOptions = {}, client?: SessiondClient): Promise<SandboxedClient> {
  return startSandboxedClient(
    { clientInfo: { name: "ts-tests" }, settings: SMALL_COMPACTION_SETTINGS, ...options },
    { command: daemonCommand(), client },
  );
}

/**
 * One daemon for the enclosing `describe`, started before its tests and stopped after
 * them. `client` is usable at once (register hooks with `prepare`); `sandbox` and
 * `initialized` from the first test on.
 */
export function suiteDaemon(
  options: InitializeOptions = {},
  prepare: (client: SessiondClient) => void = () => undefined,
): Omit<SandboxedClient, "stop"> {
  const client = new SessiondClient();
  prepare(client);
  let started: SandboxedClient | undefined;
  before(async () => {
    started = await startDaemon(options, client);
  });
  after(() => started?.stop());
  const get = () => {
    if (!started) throw new Error("the suite's daemon is not started yet: use it inside a test or hook");
    return started;
  };
  return {
    client,
    get initialized() {
      return get().initialized;
    },
    get sandbox() {
      return get().sandbox;
    },
  };
}

/** Collects every value an event fires until `dispose`. */
export function record<T>(event: Event<T>): { values: T[]; dispose(): void } {
  const values: T[] = [];
  const subscription = event((value) => values.push(value));
  return { values, dispose: () => subscription.dispose() };
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
