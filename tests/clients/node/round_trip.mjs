// openai-node against moim: say a fact (chat, not streamed), flush, ask in a new conversation
// (chat, streamed), then embeddings. Run by tests/clients/test_openai_node.py, which passes
// the base URL, the user, the texts, and checks what the fake upstream received.
import OpenAI from "openai";

const [baseURL, user, fact, question] = process.argv.slice(2);
const client = new OpenAI({
  baseURL,
  apiKey: "sk-client",
  maxRetries: 0,
  defaultHeaders: { "X-Memory-User-Id": user },
});
const model = "gpt-4o-mini";

const said = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: fact }],
});
const flushed = await fetch(baseURL + "/memory/flush", { method: "POST" });
if (!flushed.ok) throw new Error(`flush answered ${flushed.status}`);

const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: question }],
  stream: true,
});
let answer = "";
for await (const chunk of stream) answer += chunk.choices[0]?.delta?.content ?? "";

const embedded = await client.embeddings.create({ model: "text-embedding-3-small", input: fact });

console.log(
  JSON.stringify({
    said: said.choices[0].message.content,
    answer,
    embedding: embedded.data[0].embedding,
  }),
);
