// `turboquant serve` driven by the official OpenAI client and by curl.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

const MODEL = 'tq-llama-21m';

function curl(args) {
  // -s silent, -S errors, -w status on the last line.
  const out = execFileSync('curl', ['-sS', '-w', '\n%{http_code}', ...args], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const i = out.lastIndexOf('\n');
  return { body: out.slice(0, i), status: Number(out.slice(i + 1)) };
}

describe('openai client', () => {
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

  test('lists the model', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  });

  test('completion: non-streaming, usage, greedy is deterministic', async () => {
    const req = { model: MODEL, prompt: 'The capital of France is', max_tokens: 16, temperature: 0 };
    const a = await client.completions.create(req);
    const b = await client.completions.create(req);
    assert.match(a.id, /^cmpl-/);
    assert.equal(a.object, 'text_completion');
    assert.equal(a.choices.length, 1);
    assert.ok(a.choices[0].text.length > 0);
    assert.equal(a.choices[0].finish_reason, 'length');
    assert.equal(a.usage.completion_tokens, 16);
    const tok = curl(['-H', 'Content-Type: application/json', '-d',
                      JSON.stringify({ content: req.prompt }), `${server.url}/tokenize`]);
    assert.equal(a.usage.prompt_tokens, JSON.parse(tok.body).tokens.length);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + 16);
    assert.equal(b.choices[0].text, a.choices[0].text);
    // The second identical prompt reused the first one's KV cache.
    assert.ok(b.usage.prompt_tokens_details.cached_tokens > 0);
  });

  test('completion: streaming equals non-streaming, include_usage', async () => {
    const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 24, temperature: 0 };
    const whole = await client.completions.create(req);
    const stream = await client.completions.create({
      ...req, stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.text;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(chunks > 3, `only ${chunks} chunks`);
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, 24);
  });

  test('completion: stop strings never appear in the output', async () => {
    const req = { model: MODEL, prompt: 'The history of the world', max_tokens: 40, temperature: 0 };
    const full = (await client.completions.create(req)).choices[0].text;
    // A stop string from the middle of the greedy text: the output must end right before it.
    const words = full.split(' ').filter((w) => w.length >= 2);
    assert.ok(words.length >= 3, `too few words in ${JSON.stringify(full)}`);
    const stop = ' ' + words[2];
    const cut = full.slice(0, full.indexOf(stop));
    const r = await client.completions.create({ ...req, stop: [stop, 'never-seen-xyz'] });
    assert.equal(r.choices[0].text, cut);
    assert.equal(r.choices[0].finish_reason, 'stop');
    let streamed = '';
    for await (const c of await client.completions.create({ ...req, stop, stream: true })) {
      streamed += c.choices.map((x) => x.text).join('');
    }
    assert.equal(streamed, cut);
  });

  test('completion: seeded sampling repeats; logprobs', async () => {
    const req = { model: MODEL, prompt: 'In the beginning', max_tokens: 12, temperature: 1.0,
                  top_p: 0.9, seed: 1234, logprobs: 3 };
    const a = await client.completions.create(req);
    const b = await client.completions.create(req);
    assert.equal(a.choices[0].text, b.choices[0].text);
    const lp = a.choices[0].logprobs;
    assert.equal(lp.tokens.length, 12);
    assert.equal(lp.token_logprobs.length, 12);
    assert.ok(lp.token_logprobs.every((x) => x <= 0));
    assert.equal(Object.keys(lp.top_logprobs[0]).length, 3);
  });

  test('chat: non-streaming and streaming', async () => {
    const messages = [{ role: 'user', content: 'What is a dictionary?' }];
    const r = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 12, temperature: 0,
    });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 5);

    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is a dictionary?' }] }],
      max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let first = null;
    let text = '';
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      if (!chunk.choices.length) continue;
      if (first === null) first = chunk.choices[0].delta;
      text += chunk.choices[0].delta.content ?? '';
    }
    assert.equal(first.role, 'assistant');
    assert.equal(text, r.choices[0].message.content);
    assert.equal(usage.prompt_tokens, r.usage.prompt_tokens);
  });

  test('chat: multi-turn reuses the cached prefix', async () => {
    const messages = [
      { role: 'system', content: 'You are a helpful assistant who knows the dictionary well.' },
      { role: 'user', content: 'Define the word apple.' },
    ];
    const first = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
    messages.push({ role: 'assistant', content: first.choices[0].message.content });
    messages.push({ role: 'user', content: 'And the word pear?' });
    const second = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
    assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1,
              JSON.stringify(second.usage));
  });

  test('errors: unknown model, bad field, over the context', async () => {
    await assert.rejects(
      client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], temperature: 7 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'word '.repeat(1000), max_tokens: 1 }),
      (e) => e instanceof OpenAI.BadRequestError && /maximum context length is 512/.test(e.message));
  });

  test('curl: health, metrics, streaming, 404, 413, malformed JSON', () => {
    assert.equal(curl([`${server.url}/health`]).status, 200);
    const m = curl([`${server.url}/metrics`]);
    assert.equal(m.status, 200);
    assert.match(m.body, /^turboquant_generated_tokens_total \d+/m);
    assert.match(m.body, /^turboquant_kv_cache_usage_ratio /m);
    const s = curl(['-N', '-H', 'Content-Type: application/json', '-d',
                    JSON.stringify({ prompt: 'Hello', max_tokens: 5, stream: true }),
                    `${server.url}/v1/completions`]);
    assert.equal(s.status, 200);
    const events = s.body.split('\n\n').filter((e) => e.length);
    assert.ok(events.every((e) => e.startsWith('data: ')), s.body);
    assert.equal(events.at(-1), 'data: [DONE]');
    const nf = curl([`${server.url}/v1/nothing`]);
    assert.equal(nf.status, 404);
    assert.ok(JSON.parse(nf.body).error.message);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tq-e2e-'));
    try {
      const big = path.join(dir, 'big.json');
      writeFileSync(big, JSON.stringify({ prompt: 'x'.repeat(9 << 20) }));
      const r = curl(['-H', 'Content-Type: application/json', '--data-binary', `@${big}`,
                      `${server.url}/v1/completions`]);
      assert.equal(r.status, 413);
      assert.equal(JSON.parse(r.body).error.code, 'request_too_large');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const bad = curl(['-H', 'Content-Type: application/json', '-d', '{"prompt": "x",',
                      `${server.url}/v1/completions`]);
    assert.equal(bad.status, 400);
    assert.equal(JSON.parse(bad.body).error.type, 'invalid_request_error');
  });
});

describe('api key', () => {
  let server;
  before(async () => {
    server = await startServer(['--api-key', 'sk-test-123', '--parallel', '1']);
  });
  after(async () => { await server.stop(); });

  test('401 without or with a wrong key, 200 with the right one', async () => {
    const wrong = new OpenAI({ baseURL: server.baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    assert.equal(curl([`${server.baseURL}/models`]).status, 401);
    const right = new OpenAI({ baseURL: server.baseURL, apiKey: 'sk-test-123', maxRetries: 0 });
    const r = await right.completions.create({ model: MODEL, prompt: 'Hi', max_tokens: 2 });
    assert.equal(r.usage.completion_tokens, 2);
  });
});
