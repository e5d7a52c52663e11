import {
  ErrorCode,
  ResponseError,
  type CancellationToken,
  type LlmCompleteParams,
  type LlmCompleteHandler,
} from "@sessiond/client";

export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
}

/**
 * The little the adapter needs of a chat model. The extension wraps `vscode.lm`'s
 * LanguageModelChat in it; tests use a scripted one.
 */
export interface ChatModel {
  readonly id: string;
  readonly name?: string;
  /** Streams the answer's text. Cancelling `token` should stop the stream. */
  complete(messages: ChatMessage[], options: { maxTokens: number }, token: CancellationToken): AsyncIterable<string>;
}

/** Finds the model to use now; undefined when none is available (or the user said no). */
export type ChatModelSource = () => Promise<ChatModel | undefined>;

/** One answered `llm/complete`, for the output channel. */
export interface LlmCall {
  model: string;
  purpose: string;
  promptChars: number;
  answerChars: number;
  ms: number;
}

/**
 * Answers the daemon's `llm/complete` with a chat model. VS Code's chat API has no system
 * role, so the system prompt leads the one user message. Failures go back as JSON-RPC
 * errors: the daemon then counts the client as a failed summarizer and falls back.
 */
export function createLlmCompleteHandler(
  source: ChatModelSource,
  onCall: (call: LlmCall) => void = () => undefined,
): LlmCompleteHandler {
  return async (params: LlmCompleteParams, token: CancellationToken) => {
    const started = Date.now();
    const model = await source();
    if (!model)
      throw new ResponseError(
        ErrorCode.InternalError,
        "no language model is available in VS Code (check sessiond.llm.vendor/family and the model access consent)",
      );
    const messages: ChatMessage[] = [{ role: "user", content: `${params.systemPrompt.trim()}\n\n${params.prompt}` }];
    let text = "";
    try {
      for await (const chunk of model.complete(messages, { maxTokens: params.maxTokens }, token)) {
        if (token.isCancellationRequested) break;
        text += chunk;
      }
    } catch (error) {
      if (token.isCancellationRequested) throw cancelled();
      throw new ResponseError(
        ErrorCode.InternalError,
        `${model.name ?? model.id} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (token.isCancellationRequested) throw cancelled();
    if (!text.trim())
      throw new ResponseError(ErrorCode.InternalError, `${model.name ?? model.id} returned an empty answer`);
    onCall({
      model: model.name ?? model.id,
      purpose: params.purpose ?? "history",
      promptChars: messages[0]!.content.length,
      answerChars: text.length,
      ms: Date.now() - started,
    });
    return { text };
  };
}

function cancelled(): ResponseError<void> {
  return new ResponseError(ErrorCode.RequestCancelled, "the summary was cancelled");
}
