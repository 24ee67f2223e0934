// The Vercel AI SDK (`ai` with `@ai-sdk/openai`) against moim, on its default model API, the
// Responses API: say a fact, flush, ask in a new conversation (streamed), then a tool call
// and its result sent back. Run by tests/clients/test_ai_sdk.py, which passes the base URL
// (naming the user in the path, as a client that sets only a base URL does) and the texts,
// and checks what moim stored and what the fake upstream received.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const [baseURL, fact, question, weatherQuestion] = process.argv.slice(2);
const provider = createOpenAI({ baseURL, apiKey: "sk-client" });

const said = await generateText({ model: provider("gpt-4o-mini"), prompt: fact, maxRetries: 0 });
const flushed = await fetch(baseURL + "/memory/flush", { method: "POST" });
if (!flushed.ok) throw new Error(`flush answered ${flushed.status}`);

const stream = streamText({ model: provider("gpt-4o-mini"), prompt: question, maxRetries: 0 });
let answer = "";
for await (const piece of stream.textStream) answer += piece;

const getWeather = tool({
  description: "The weather in a city",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny in ${city}`,
});
const called = await generateText({
  model: provider("tool-call"),
  tools: { get_weather: getWeather },
  stopWhen: stepCountIs(1),
  prompt: weatherQuestion,
  maxRetries: 0,
});
const answered = await generateText({
  model: provider("gpt-4o-mini"),
  tools: { get_weather: getWeather },
  messages: [{ role: "user", content: weatherQuestion }, ...called.response.messages],
  maxRetries: 0,
});

console.log(JSON.stringify({ said: said.text, answer, weather: answered.text }));
