// What only the extension's tests need on top of @sessiond/client/testing: the repository's
// venv, sessions to show, a scripted Ui and a scripted chat model.
import { resolve } from "node:path";
import {
  CancellationTokenSource,
  SessiondClient,
  type CancellationToken,
  type InitializeOptions,
} from "@sessiond/client";
import {
  SMALL_COMPACTION_SETTINGS,
  sessiondCommand,
  startSandboxedClient,
  turn as testingTurn,
  type Sandbox,
} from "@sessiond/client/testing";
import type { PickItem, Ui } from "../src/core/flows";
import type { ChatMessage, ChatModel } from "../src/core/llm";

/** clients/vscode/build/test -> the repository root. */
export const repoRoot = resolve(__dirname, "..", "..", "..", "..");

/**
 * argv of the daemon: `$SESSIOND_COMMAND`, else the repository's venv (`$SESSIOND_VENV`,
 * default `.venv`, relative to the repository root); `transport` instead of `--stdio`.
 */
export function daemonCommand(...transport: string[]): string[] {
  return sessiondCommand({ root: repoRoot, defaultVenv: ".venv", transport });
}

/** A client on a daemon in `box` (which the caller removes), with the small compaction settings. */
export async function startClient(
  box: Sandbox,
  options: InitializeOptions = {},
  prepare: (client: SessiondClient) => void = () => undefined,
): Promise<SessiondClient> {
  const client = new SessiondClient();
  prepare(client);
  const initialize = { clientInfo: { name: "vscode-tests" }, settings: SMALL_COMPACTION_SETTINGS, ...options };
  await startSandboxedClient(initialize, { client, command: daemonCommand(), sandbox: box });
  return client;
}

/** A user message and its answer about the config loader, about 150 tokens by the chars estimator. */
export function turn(i: number, tokens: number) {
  return testingTurn(i, tokens, { user: "rename the config loader ", assistant: "the loader is renamed " });
}

/**
 * A session with `turns` turns whose last answer reports `lastTokens` (by default 2000, past
 * the threshold of SMALL_CONTEXT_WINDOW).
 */
export async function filledSession(
  client: SessiondClient,
  cwd: string,
  turns = 6,
  lastTokens = 2000,
  writeNow = false,
) {
  const created = await client.newSession({ cwd, writeNow });
  const ids: string[] = [];
  for (let i = 0; i < turns; i++) {
    ids.push(
      ...(
        await client.append({
          sessionId: created.sessionId,
          entries: turn(i, i === turns - 1 ? lastTokens : 200 * (i + 1)),
        })
      ).ids,
    );
  }
  return { ...created, ids };
}

/** A Ui answering from a script; what it was shown is kept for assertions. */
export class ScriptedUi implements Ui {
  readonly picks: { title: string; items: PickItem<unknown>[] }[] = [];
  readonly inputs: string[] = [];
  readonly infos: string[] = [];
  readonly errors: string[] = [];
  readonly progressTitles: string[] = [];
  /** The token handed to the running request; cancel it to test cancellation. */
  readonly cancellation = new CancellationTokenSource();

  constructor(
    private readonly answers: {
      pick?: (items: PickItem<unknown>[], title: string) => unknown;
      input?: string | undefined | ((title: string) => string | undefined);
      file?: string;
    } = {},
  ) {}

  async pick<T>(items: PickItem<T>[], options: { title: string }): Promise<T | undefined> {
    this.picks.push({ title: options.title, items });
    return this.answers.pick?.(items, options.title) as T | undefined;
  }
  async input(options: { title: string }): Promise<string | undefined> {
    this.inputs.push(options.title);
    const answer = this.answers.input;
    return typeof answer === "function" ? answer(options.title) : answer;
  }
  async pickFile(): Promise<string | undefined> {
    return this.answers.file;
  }
  progress<T>(title: string, run: (token: CancellationToken) => Promise<T>): Promise<T> {
    this.progressTitles.push(title);
    return run(this.cancellation.token);
  }
  info(message: string): void {
    this.infos.push(message);
  }
  error(message: string): void {
    this.errors.push(message);
  }
}

/** A chat model answering with `chunks`, or waiting for cancellation when `hang` is set. */
export class ScriptedChatModel implements ChatModel {
  readonly id = "scripted-model";
  readonly name = "Scripted";
  readonly requests: ChatMessage[][] = [];
  cancelled = false;

  constructor(private readonly behaviour: { chunks?: string[]; hang?: boolean; fail?: string } = {}) {}

  async *complete(
    messages: ChatMessage[],
    _options: { maxTokens: number },
    token: CancellationToken,
  ): AsyncIterable<string> {
    this.requests.push(messages);
    if (this.behaviour.fail) throw new Error(this.behaviour.fail);
    if (this.behaviour.hang) {
      await new Promise<void>((resolvePromise) => token.onCancellationRequested(() => resolvePromise()));
      this.cancelled = true;
      return;
    }
    for (const chunk of this.behaviour.chunks ?? []) yield chunk;
  }
}
