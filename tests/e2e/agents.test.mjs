// The agent-facing API with the official openai client: tool_choice named and required (the
// arguments parse and validate against the schema), streamed tool calls reassembled by the
// client's stream helper, response_format json_schema, logprobs, n > 1 with a seed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

const MODEL = 'tq-llama-21m';

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string' },
        unit: { enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer' },
      },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const timeTool = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { utc: { type: 'boolean' } }, required: ['utc'] },
  },
};

// Checks a value against the schema subset used here (type, properties, required, enum, items,
// additionalProperties: false).
function validate(schema, v, where = '$') {
  if (schema.enum) assert.ok(schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(v)), `${where}: ${JSON.stringify(v)} not in enum`);
  const t = schema.type;
  if (t === 'object') {
    assert.ok(v && typeof v === 'object' && !Array.isArray(v), `${where}: not an object`);
    for (const r of schema.required || []) assert.ok(r in v, `${where}: missing ${r}`);
    for (const k of Object.keys(v)) {
      assert.ok(schema.properties && k in schema.properties, `${where}: unexpected key ${k}`);
      validate(schema.properties[k], v[k], `${where}.${k}`);
    }
  } else if (t === 'array') {
    assert.ok(Array.isArray(v), `${where}: not an array`);
    v.forEach((x, i) => schema.items && validate(schema.items, x, `${where}[${i}]`));
  } else if (t === 'string') assert.equal(typeof v, 'string', where);
  else if (t === 'integer') assert.ok(Number.isInteger(v), `${where}: not an integer`);
  else if (t === 'number') assert.equal(typeof v, 'number', where);
  else if (t === 'boolean') assert.equal(typeof v, 'boolean', where);
}

describe('agents: tools, structured output, logprobs', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--parallel', '4', '--ctx', '512']);
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    const code = await server.stop();
    assert.equal(code, 0, `server exit status ${code}\n${server.stderr()}`);
  });

  test('tool_choice naming a function gives a valid call', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [weatherTool, timeTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 200,
      temperature: 0.8,
      seed: 1,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(r));
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    validate(weatherTool.function.parameters, JSON.parse(call.function.arguments));
  });

  test('tool_choice required picks one of the tools', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Tell me something.' }],
      tools: [weatherTool, timeTool],
      tool_choice: 'required',
      max_tokens: 200,
      seed: 2,
    });
    const call = r.choices[0].message.tool_calls[0];
    const tool = [weatherTool, timeTool].find((t) => t.function.name === call.function.name);
    assert.ok(tool, `unknown tool ${call.function.name}`);
    validate(tool.function.parameters, JSON.parse(call.function.arguments));
  });

  test('streamed tool calls reassembled by the client', async () => {
    const stream = client.chat.completions.stream({
      model: MODEL,
      messages: [{ role: 'user', content: 'Time please' }],
      tools: [weatherTool, timeTool],
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      max_tokens: 100,
    });
    const done = await stream.finalChatCompletion();
    const c = done.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls[0].function.name, 'get_time');
    validate(timeTool.function.parameters, JSON.parse(c.message.tool_calls[0].function.arguments));
    // A round trip: the call and its result go back in; the template renders them.
    const next = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Time please' },
        { role: 'assistant', content: null, tool_calls: c.message.tool_calls },
        { role: 'tool', tool_call_id: c.message.tool_calls[0].id, content: '12:00' },
      ],
      tools: [weatherTool, timeTool],
      max_tokens: 8,
    });
    assert.equal(next.choices.length, 1);
  });

  test('response_format json_schema: the content parses and validates', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        age: { type: 'integer' },
        tags: { type: 'array', items: { type: 'string' } },
        kind: { enum: ['cat', 'dog'] },
      },
      required: ['name', 'age', 'kind'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Describe a pet as JSON.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'pet', schema, strict: true } },
        max_tokens: 300,
        seed,
      });
      const c = r.choices[0];
      if (c.finish_reason === 'length') continue;  // a random-weight model may ramble in a string
      assert.equal(c.finish_reason, 'stop');
      validate(schema, JSON.parse(c.message.content));
    }
  });

  test('an unsupported schema keyword is a 400 naming it', async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'x' }],
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'x', schema: { type: 'string', format: 'email' } },
        },
      }),
      (e) => e.status === 400 && /'format'/.test(e.message));
  });

  test('logprobs and top_logprobs', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: 3,
      temperature: 0,
    });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, 5);
    for (const e of lp) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob);
      assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    }
  });

  test('n > 1 with a seed is reproducible', async () => {
    const req = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 12, n: 3, seed: 42, temperature: 1 };
    const a = await client.chat.completions.create(req);
    const b = await client.chat.completions.create(req);
    assert.equal(a.choices.length, 3);
    assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
    assert.ok(a.usage.completion_tokens <= 36 && a.usage.completion_tokens >= 3);
  });
});
