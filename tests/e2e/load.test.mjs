// Load test that stops by itself: 32 concurrent streaming clients for TQ_LOAD_SECONDS (default
// 30), some hanging up early and some sending malformed bodies. Every well-formed request must
// succeed, the resident set must stay bounded, and the server must be healthy afterwards.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { rssBytes, startServer } from './server.mjs';

const CLIENTS = 32;
const SECONDS = Number(process.env.TQ_LOAD_SECONDS || 30);
const MODEL = 'tq-llama-21m';

const MALFORMED = [
  '{"prompt": "unterminated',
  '[]',
  '{"prompt": 42}',
  '{"messages": [{"role": "user"}]}',
  '{"messages": [{"role": "wizard", "content": "x"}]}',
  '{"prompt": "x", "max_tokens": "many"}',
  '{"prompt": "x", "temperature": -1}',
  '{"prompt": "x", "stop": [1, 2]}',
  '{"prompt": [99999999]}',
  '\u0000\u0001\u0002',
  '{"prompt": "x", "stream_options": 5, "stream": true}',
  '',
];

let server;
before(async () => {
  server = await startServer(['--parallel', '8', '--max-queue', '64', '--ctx', '512']);
});
after(async () => {
  const code = await server.stop();
  assert.equal(code, 0, `server exit status ${code}\n${server.stderr()}`);
});

test(`${CLIENTS} streaming clients for ${SECONDS} s`, { timeout: (SECONDS + 120) * 1000 }, async () => {
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'x', maxRetries: 0, timeout: 120000 });
  // Warm up, then take the baseline resident set.
  await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4 });
  const rss0 = rssBytes(server.proc.pid);
  let rssPeak = rss0;
  const sampler = setInterval(() => { rssPeak = Math.max(rssPeak, rssBytes(server.proc.pid)); }, 250);

  const stats = { ok: 0, failed: 0, aborted: 0, malformed: 0, malformedBad: 0, tokens: 0 };
  const failures = [];
  const deadline = Date.now() + SECONDS * 1000;
  const prompts = ['The history of', 'A dictionary is', 'Python is a language', 'Once upon a time',
                   'The weather today'];

  async function wellFormed(id, n) {
    const prompt = prompts[(id + n) % prompts.length];
    const chat = (id + n) % 2 === 0;
    const max_tokens = 8 + ((id * 7 + n) % 24);
    const stream = chat
      ? await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: prompt }], max_tokens, stream: true,
        stream_options: { include_usage: true } })
      : await client.completions.create({
        model: MODEL, prompt, max_tokens, stream: true, stream_options: { include_usage: true } });
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) finish = c.finish_reason ?? finish;
    }
    assert.ok(finish === 'stop' || finish === 'length', `finish_reason ${finish}`);
    assert.ok(usage && usage.completion_tokens <= max_tokens, JSON.stringify(usage));
    stats.tokens += usage.completion_tokens;
  }

  async function hangUp(id) {
    const ac = new AbortController();
    const stream = await client.completions.create(
      { model: MODEL, prompt: prompts[id % prompts.length], max_tokens: 200, stream: true },
      { signal: ac.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) {
        if (++chunks >= 2) ac.abort();
      }
    } catch (e) {
      if (!ac.signal.aborted) throw e;
    }
  }

  async function malformed(id, n) {
    const body = MALFORMED[(id + n) % MALFORMED.length];
    const path = n % 2 ? '/v1/completions' : '/v1/chat/completions';
    const r = await fetch(server.url + path, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const j = await r.json();
    if (r.status !== 400 || !j.error || typeof j.error.message !== 'string') {
      stats.malformedBad++;
      failures.push(`malformed ${JSON.stringify(body)} -> ${r.status} ${JSON.stringify(j)}`);
    }
    stats.malformed++;
  }

  async function worker(id) {
    for (let n = 0; Date.now() < deadline; n++) {
      const kind = (id + n) % 8;
      try {
        if (kind === 0) {
          await hangUp(id);
          stats.aborted++;
        } else if (kind === 1) {
          await malformed(id, n);
        } else {
          await wellFormed(id, n);
          stats.ok++;
        }
      } catch (e) {
        if (kind === 0) { stats.aborted++; continue; }
        stats.failed++;
        failures.push(`${kind === 1 ? 'malformed' : 'request'}: ${e.status ?? ''} ${e.message}`);
      }
    }
  }

  const t0 = Date.now();
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => worker(i)));
  const secs = (Date.now() - t0) / 1000;
  clearInterval(sampler);
  console.log(`load: ${JSON.stringify(stats)} in ${secs.toFixed(1)} s, ` +
              `${(stats.tokens / secs).toFixed(1)} tok/s; RSS ${(rss0 / 2 ** 20).toFixed(0)} MiB -> ` +
              `peak ${(rssPeak / 2 ** 20).toFixed(0)} MiB`);
  assert.deepEqual(failures.slice(0, 5), []);
  assert.equal(stats.failed, 0);
  assert.ok(stats.ok >= CLIENTS, `only ${stats.ok} requests completed`);
  assert.ok(stats.aborted > 0 && stats.malformed > 0);
  // Bounded: the caches are preallocated per slot, so load must not grow memory much.
  assert.ok(rssPeak - rss0 < 256 * 2 ** 20, `RSS grew by ${(rssPeak - rss0) / 2 ** 20} MiB`);

  // Healthy afterwards: nothing left running, and it still answers.
  const health = await fetch(server.url + '/health');
  assert.equal(health.status, 200);
  let metrics = '';
  for (let i = 0; i < 50; i++) {
    metrics = await (await fetch(server.url + '/metrics')).text();
    if (/^turboquant_requests_running 0$/m.test(metrics) && /^turboquant_requests_queued 0$/m.test(metrics)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(metrics, /^turboquant_requests_running 0$/m);
  assert.match(metrics, /^turboquant_requests_queued 0$/m);
  assert.match(metrics, /^turboquant_sequences_finished_total\{reason="cancelled"\} [1-9]/m);
  const r = await client.completions.create({ model: MODEL, prompt: 'Goodbye', max_tokens: 3 });
  assert.equal(r.usage.completion_tokens, 3);
});
