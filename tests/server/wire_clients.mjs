// wire_clients.mjs BASE_URL: drives `tern serve`'s /v1/messages with the official Anthropic npm
// client and /v1/responses with the official openai npm client (whole and streamed, through each
// client's own stream helpers, which check the event order), against the same greedy request sent
// as a chat completion: the text, the finish reason and the token counts must agree. Then a
// conversation with tool use and tool results in each format, and refusals in each format's
// error shape. Exits non-zero on the first mismatch.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const base = process.argv[2];
const anth = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0 });
const oai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const model = 'test-model';
const system = 'You tell short stories.';
const user = 'A story about a cat';

const ref = await oai.chat.completions.create({
  model, messages: [{ role: 'system', content: system }, { role: 'user', content: user }], max_tokens: 24, temperature: 0,
});
const want = ref.choices[0].message.content;
const length = ref.choices[0].finish_reason === 'length';
assert.ok(want.length > 0, 'empty reference reply');

// Messages, whole
const m = await anth.messages.create({
  model, system, messages: [{ role: 'user', content: user }], max_tokens: 24, temperature: 0,
});
assert.equal(m.type, 'message');
assert.equal(m.role, 'assistant');
assert.ok(m.id.startsWith('msg_'));
const mtext = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
assert.equal(mtext, want);
assert.equal(m.stop_reason, length ? 'max_tokens' : 'end_turn');
assert.equal(m.usage.output_tokens, ref.usage.completion_tokens);
assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens);

// Messages, streamed with the client's MessageStream
const ms = anth.messages.stream({ model, system, messages: [{ role: 'user', content: user }], max_tokens: 24, temperature: 0 });
let deltas = '';
ms.on('text', (t) => { deltas += t; });
const fm = await ms.finalMessage();
assert.equal(deltas, want);
assert.equal(fm.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), want);
assert.equal(fm.stop_reason, m.stop_reason);
assert.equal(fm.usage.output_tokens, m.usage.output_tokens);

// Responses, whole and streamed with the client's ResponseStream
const r = await oai.responses.create({ model, instructions: system, input: user, max_output_tokens: 24, temperature: 0 });
assert.equal(r.object, 'response');
assert.equal(r.output_text, want);
assert.equal(r.status, length ? 'incomplete' : 'completed');
assert.equal(r.usage.output_tokens, ref.usage.completion_tokens);
assert.equal(r.usage.input_tokens, ref.usage.prompt_tokens);
const rs = oai.responses.stream({ model, instructions: system, input: user, max_output_tokens: 24, temperature: 0 });
let rdeltas = '';
rs.on('response.output_text.delta', (e) => { rdeltas += e.delta; });
const fr = await rs.finalResponse();
assert.equal(rdeltas, want);
assert.equal(fr.output_text, want);

// a conversation with a tool call and its result, in each format: the same prompt as the chat form
const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
const chatRef = await oai.chat.completions.create({
  model, max_tokens: 8, temperature: 0,
  tools: [{ type: 'function', function: { name: tools[0].name, description: tools[0].description, parameters: tools[0].input_schema } }],
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21 C' },
  ],
});
const mt = await anth.messages.create({
  model, max_tokens: 8, temperature: 0, tools,
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'Sunny, 21 C' }] },
  ],
});
assert.equal(mt.usage.input_tokens + mt.usage.cache_read_input_tokens, chatRef.usage.prompt_tokens);
const rt = await oai.responses.create({
  model, max_output_tokens: 8, temperature: 0,
  tools: [{ type: 'function', name: tools[0].name, description: tools[0].description, parameters: tools[0].input_schema }],
  input: [
    { role: 'user', content: 'Weather in Paris?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: 'Sunny, 21 C' },
  ],
});
assert.equal(rt.usage.input_tokens, chatRef.usage.prompt_tokens);
assert.equal(rt.output_text, chatRef.choices[0].message.content ?? '');

// refusals, each in its format's error shape
await assert.rejects(
  anth.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'x' } }] }] }),
  (e) => e.status === 400 && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error',
);
await assert.rejects(
  anth.messages.create({ model, max_tokens: 8, tool_choice: { type: 'any' }, tools, messages: [{ role: 'user', content: 'x' }] }),
  (e) => e.status === 400 && /tool_choice/.test(e.error?.error?.message ?? ''),
);
await assert.rejects(
  oai.responses.create({ model, input: 'x', previous_response_id: 'resp_1' }),
  (e) => e.status === 400 && e.param === 'previous_response_id',
);
await assert.rejects(
  oai.responses.create({ model, input: [{ type: 'web_search_call', id: 'ws_1' }] }),
  (e) => e.status === 400 && /not supported/.test(e.message),
);
console.log(`wire clients: all checks passed (reply: ${JSON.stringify(want.slice(0, 40))}...)`);
