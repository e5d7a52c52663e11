import * as vscode from "vscode";
import type { CancellationToken } from "@sessiond/client";
import type { ChatMessage, ChatModel, ChatModelSource } from "../core/llm.js";

/** `vscode.lm` models as the adapter's ChatModel, chosen by the vendor/family settings. */
export function vscodeChatModels(selector: () => { vendor: string; family: string }): ChatModelSource {
  return async () => {
    const { vendor, family } = selector();
    const [model] = await vscode.lm.selectChatModels({ ...(vendor ? { vendor } : {}), ...(family ? { family } : {}) });
    return model ? wrap(model) : undefined;
  };
}

function wrap(model: vscode.LanguageModelChat): ChatModel {
  return {
    id: model.id,
    name: model.name,
    async *complete(messages: ChatMessage[], _options: { maxTokens: number }, token: CancellationToken) {
      const source = new vscode.CancellationTokenSource();
      const subscription = token.onCancellationRequested(() => source.cancel());
      try {
        const response = await model.sendRequest(
          messages.map((m) =>
            m.role === "user"
              ? vscode.LanguageModelChatMessage.User(m.content)
              : vscode.LanguageModelChatMessage.Assistant(m.content),
          ),
          {
            justification:
              "sessiond summarizes the older part of your agent session so that it fits the model's context.",
          },
          source.token,
        );
        for await (const chunk of response.text) yield chunk;
      } finally {
        subscription.dispose();
        source.dispose();
      }
    },
  };
}
