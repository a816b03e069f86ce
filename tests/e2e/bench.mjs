// Serving benchmark (not a test): aggregate decode tokens/s and time to first token with 1, 4,
// 8 and 16 concurrent streaming clients.
// Usage: node tests/e2e/bench.mjs [--model DIR] [--tokens 128] [--clients 1,4,8,16] [-- serve args]
import OpenAI from 'openai';
import { modelDir, startServer } from './server.mjs';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const dashdash = argv.indexOf('--');
const serveArgs = dashdash >= 0 ? argv.slice(dashdash + 1) : [];
const TOKENS = Number(opt('--tokens', 128));
const CLIENTS = opt('--clients', '1,4,8,16').split(',').map(Number);
// Each setting runs REPEAT times and keeps the fastest round (a shared machine's noise only
// ever slows a round down).
const REPEAT = Number(opt('--repeat', 3));
const dir = opt('--model', modelDir());
const maxClients = Math.max(...CLIENTS);

const server = await startServer(['--parallel', String(maxClients), '--ctx', '1024', ...serveArgs], dir);
const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'x', maxRetries: 0, timeout: 600000 });
const model = (await client.models.list()).data[0].id;

async function one(i) {
  const t0 = performance.now();
  const stream = await client.completions.create({
    model, prompt: `Story number ${i}: once upon a time`, max_tokens: TOKENS, temperature: 0.8,
    seed: i, ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  let first = null;
  let last = null;
  let tokens = 0;
  for await (const chunk of stream) {
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
    if (chunk.choices.length && chunk.choices[0].text) {
      last = performance.now();
      if (first === null) first = last;
    }
  }
  return { ttft: (first - t0) / 1000, decode: (last - first) / 1000, tokens, end: last };
}

// Scheduler counters from /metrics.
async function counters() {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const get = (name) => Number(new RegExp(`^turboquant_${name} (\\S+)$`, 'm').exec(text)[1]);
  return { steps: get('decode_steps_total'), secs: get('decode_seconds_total'),
           tokens: get('generated_tokens_total') };
}
const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
await one(0);  // warm-up
const rows = [];
for (const n of CLIENTS) {
  let best = null;
  for (let rep = 0; rep < REPEAT; rep++) {
    const c0 = await counters();
    const t0 = performance.now();
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => one(i + 1)));
    const wall = (performance.now() - t0) / 1000;
    const c1 = await counters();
    const steps = c1.steps - c0.steps;
    const total = rs.reduce((s, r) => s + r.tokens, 0);
    const ttfts = rs.map((r) => r.ttft);
    const perClient = rs.map((r) => (r.tokens - 1) / r.decode);
    const row = {
      clients: n,
      tokens: total,
      wall_s: +wall.toFixed(2),
      aggregate_tok_s: +(total / wall).toFixed(1),
      per_client_tok_s: +(perClient.reduce((a, b) => a + b, 0) / n).toFixed(1),
      ttft_mean_ms: +(1000 * ttfts.reduce((a, b) => a + b, 0) / n).toFixed(0),
      ttft_p90_ms: +(1000 * pct(ttfts, 0.9)).toFixed(0),
      // Batching as the scheduler saw it: tokens per decode step (one pass over the weights
      // each) and the mean time of a step.
      tokens_per_step: +((c1.tokens - c0.tokens) / steps).toFixed(2),
      step_ms: +(1000 * (c1.secs - c0.secs) / steps).toFixed(2),
    };
    if (!best || row.aggregate_tok_s > best.aggregate_tok_s) best = row;
  }
  rows.push(best);
}
console.table(rows);
const base = rows.find((r) => r.clients === 1);
if (base) {
  for (const r of rows) console.log(`${r.clients} clients: ${(r.aggregate_tok_s / base.aggregate_tok_s).toFixed(2)}x the 1-client rate`);
}
console.log(JSON.stringify({ model: dir, tokens_per_request: TOKENS, repeat: REPEAT, rows }));
await server.stop();
