// openai_client.mjs BASE_URL: drives `tern serve` with the official openai npm client
// (chat, completions, streaming, usage, models, errors). Exits non-zero on the first mismatch.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const base = process.argv[2];
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const model = 'test-model';

const models = await client.models.list();
assert.equal(models.data[0].id, model);

// chat, whole and streamed: the same greedy text
const msgs = [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: 'A story about a cat' }];
const r = await client.chat.completions.create({ model, messages: msgs, max_tokens: 24, temperature: 0 });
assert.equal(r.object, 'chat.completion');
const reply = r.choices[0].message.content;
assert.equal(r.choices[0].message.role, 'assistant');
assert.ok(reply.length > 0, 'empty reply');
assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 24);
assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);

const stream = await client.chat.completions.create({
  model, messages: msgs, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = '', finish = null, usage = null, chunks = 0;
for await (const ch of stream) {
  chunks++;
  if (ch.usage) usage = ch.usage;
  const c = ch.choices[0];
  if (!c) continue;
  text += c.delta?.content ?? '';
  if (c.finish_reason) finish = c.finish_reason;
}
assert.equal(text, reply);
assert.equal(finish, r.choices[0].finish_reason);
assert.equal(usage.completion_tokens, r.usage.completion_tokens);
assert.ok(chunks >= 3, 'no content, finish and usage chunks');

// completions, with a stop string, whole and streamed
const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0 });
assert.equal(c.object, 'text_completion');
const full = c.choices[0].text;
const stop = full.slice(20, 27);
const cut = full.slice(0, full.indexOf(stop));
const cs = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: [stop] });
assert.equal(cs.choices[0].text, cut);
assert.equal(cs.choices[0].finish_reason, 'stop');
let streamed = '';
for await (const ch of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop, stream: true }))
  streamed += ch.choices[0]?.text ?? '';
assert.equal(streamed, cut);

// max_tokens 1 and 2 exactly
for (const n of [1, 2]) {
  const x = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: n, temperature: 0 });
  assert.equal(x.usage.completion_tokens, n);
  assert.equal(x.choices[0].finish_reason, 'length');
}

// errors surface as the client's typed errors with OpenAI's fields
await assert.rejects(
  client.chat.completions.create({ model, messages: msgs, temperature: 5 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature',
);
await assert.rejects(
  client.chat.completions.create({ model, messages: [] }),
  (e) => e.status === 400 && e.param === 'messages',
);
console.log(`openai client: all checks passed (reply: ${JSON.stringify(reply.slice(0, 40))}...)`);
