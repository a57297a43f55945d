// tool_calls.mjs BASE_URL MODE: tool calls of `tern serve` through the official clients' stream
// helpers. The server runs the Qwen3 golden model with a reply given in advance (the test's
// script_reply), so the model "writes" the template's tool-call markup.
//   MODE calls: two calls in one reply (get_weather {"city":"Paris"}, get_time {"tz":"CET"}):
//     openai's ChatCompletionStream accumulates them from the deltas (index, id, name, arguments
//     as a JSON string) into the same message the whole reply has, finish_reason tool_calls;
//     Anthropic's MessageStream gives two tool_use blocks with their inputs, stop_reason tool_use;
//     openai's ResponseStream gives two function_call items; then the tool results go back in
//     the next request of each format.
//   MODE broken: markup whose arguments are not JSON: no call is made up, and the text stays in
//     the content, whole and streamed, finish_reason stop.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const base = process.argv[2];
const mode = process.argv[3];
const oai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const anth = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0 });
const model = 'test-model';
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const messages = [{ role: 'user', content: 'Weather in Paris, and the time?' }];

if (mode === 'calls') {
  const whole = await oai.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 200 });
  const wm = whole.choices[0].message;
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  assert.equal(wm.tool_calls.length, 2);
  assert.deepEqual(wm.tool_calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  assert.deepEqual(JSON.parse(wm.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.deepEqual(JSON.parse(wm.tool_calls[1].function.arguments), { tz: 'CET' });

  // raw deltas: every tool-call delta has its index, and the first of each call its id and name
  const raw = await oai.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 200, stream: true });
  const seen = new Map();
  let finish = null;
  for await (const ch of raw) {
    const c = ch.choices[0];
    if (!c) continue;
    if (c.finish_reason) finish = c.finish_reason;
    for (const d of c.delta?.tool_calls ?? []) {
      assert.equal(typeof d.index, 'number');
      if (!seen.has(d.index)) {
        assert.ok(d.id && d.function?.name, 'first delta of a call without id or name');
        seen.set(d.index, { id: d.id, name: d.function.name, args: '' });
      }
      seen.get(d.index).args += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.deepEqual([...seen.values()].map((c) => [c.name, JSON.parse(c.args)]), [['get_weather', { city: 'Paris' }], ['get_time', { tz: 'CET' }]]);

  // the stream helper accumulates the same message
  const helper = oai.chat.completions.stream({ model, messages, tools, temperature: 0, max_tokens: 200 });
  const final = await helper.finalChatCompletion();
  const fm = final.choices[0].message;
  assert.deepEqual(fm.tool_calls.map((c) => [c.function.name, c.function.arguments]),
    wm.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  assert.ok(fm.tool_calls.every((c) => c.id && c.type === 'function'));

  // the results go back as tool messages: accepted, and the reply is again the scripted calls
  const next = await oai.chat.completions.create({
    model, tools, temperature: 0, max_tokens: 200,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: wm.tool_calls },
      { role: 'tool', tool_call_id: wm.tool_calls[0].id, content: 'Sunny' },
      { role: 'tool', tool_call_id: wm.tool_calls[1].id, content: '14:00' }],
  });
  assert.ok(next.usage.prompt_tokens > whole.usage.prompt_tokens);

  // Anthropic's MessageStream: two tool_use blocks
  const atools = tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
  const ms = anth.messages.stream({ model, max_tokens: 200, temperature: 0, tools: atools, messages });
  const am = await ms.finalMessage();
  assert.equal(am.stop_reason, 'tool_use');
  const uses = am.content.filter((b) => b.type === 'tool_use');
  assert.deepEqual(uses.map((b) => [b.name, b.input]), [['get_weather', { city: 'Paris' }], ['get_time', { tz: 'CET' }]]);
  const am2 = await anth.messages.create({
    model, max_tokens: 200, temperature: 0, tools: atools,
    messages: [...messages, { role: 'assistant', content: am.content },
      { role: 'user', content: uses.map((b) => ({ type: 'tool_result', tool_use_id: b.id, content: 'ok' })) }],
  });
  assert.equal(am2.stop_reason, 'tool_use');

  // openai's ResponseStream: two function_call items
  const rtools = tools.map((t) => ({ type: 'function', name: t.function.name, description: t.function.description, parameters: t.function.parameters }));
  const rs = oai.responses.stream({ model, input: messages[0].content, tools: rtools, temperature: 0, max_output_tokens: 200 });
  const rr = await rs.finalResponse();
  const calls = rr.output.filter((o) => o.type === 'function_call');
  assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Paris' }], ['get_time', { tz: 'CET' }]]);
  const rr2 = await oai.responses.create({
    model, tools: rtools, temperature: 0, max_output_tokens: 200,
    input: [messages[0], ...calls.map((c) => ({ type: 'function_call', call_id: c.call_id, name: c.name, arguments: c.arguments })),
      ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: 'ok' }))],
  });
  assert.equal(rr2.output.filter((o) => o.type === 'function_call').length, 2);
} else if (mode === 'broken') {
  const whole = await oai.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 200 });
  const m = whole.choices[0].message;
  assert.equal(whole.choices[0].finish_reason, 'stop');
  assert.equal(m.tool_calls, undefined);
  assert.ok(m.content.includes('<tool_call>') && m.content.includes('"arguments": "oops}'), m.content);
  const raw = await oai.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 200, stream: true });
  let text = '';
  for await (const ch of raw) text += ch.choices[0]?.delta?.content ?? '';
  assert.equal(text, m.content);
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(`tool calls (${mode}): all checks passed`);
