#include "server/web/chat_page.h"

namespace tq::server {
namespace {

// The page talks to this server only: POST /v1/chat/completions (streamed), GET /v1/models and
// GET /metrics, with "Authorization: Bearer <key>" when the user gave a key (asked for on a 401
// and kept in localStorage). Stop aborts the stream; the server then drops the sequence.
constexpr char kHtml[] = R"TQPAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>turboquant chat</title>
<style>
  :root { --bg: #f7f7f8; --fg: #1d1d1f; --muted: #6b6b76; --line: #dcdce2; --accent: #2d5bd7; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: var(--bg); color: var(--fg);
         display: grid; grid-template-columns: 1fr 280px; height: 100vh; }
  main { display: flex; flex-direction: column; min-width: 0; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 12px;
           align-items: center; }
  header b { font-size: 16px; }
  #model { color: var(--muted); }
  #log { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { max-width: 820px; margin: 0 auto 12px; padding: 10px 14px; border-radius: 10px;
         white-space: pre-wrap; word-wrap: break-word; }
  .user { background: #e3e9fb; }
  .assistant { background: #fff; border: 1px solid var(--line); }
  .error { background: #fde8e8; color: #8a1c1c; }
  .meta { font-size: 12px; color: var(--muted); margin-top: 4px; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; resize: vertical; min-height: 44px; font: inherit; padding: 8px;
             border: 1px solid var(--line); border-radius: 8px; }
  button { font: inherit; padding: 8px 16px; border-radius: 8px; border: 1px solid var(--accent);
           background: var(--accent); color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: var(--accent); }
  button:disabled { opacity: .45; cursor: default; }
  aside { border-left: 1px solid var(--line); padding: 12px 14px; overflow-y: auto; background: #fff; }
  aside h3 { font-size: 13px; text-transform: uppercase; color: var(--muted); margin: 14px 0 6px; }
  label { display: block; font-size: 13px; margin: 6px 0 2px; }
  aside input, aside textarea { width: 100%; font: inherit; padding: 4px 6px; border: 1px solid var(--line);
                                border-radius: 6px; }
  table { width: 100%; font-size: 13px; border-collapse: collapse; }
  td { padding: 2px 0; } td:last-child { text-align: right; font-variant-numeric: tabular-nums; }
</style>
</head>
<body>
<main>
  <header><b>turboquant</b><span id="model">…</span>
    <span style="flex:1"></span><button type="button" class="secondary" id="clear">New chat</button></header>
  <div id="log" aria-live="polite"></div>
  <form id="form">
    <textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
    <button type="submit" id="send">Send</button>
    <button type="button" class="secondary" id="stop" disabled>Stop</button>
  </form>
</main>
<aside>
  <h3>Conversation</h3>
  <label for="system">System prompt</label>
  <textarea id="system" rows="3" placeholder="(none)"></textarea>
  <h3>Sampling</h3>
  <label for="temperature">temperature</label><input id="temperature" type="number" step="0.1" min="0" max="2" placeholder="model default">
  <label for="top_p">top_p</label><input id="top_p" type="number" step="0.05" min="0" max="1" placeholder="model default">
  <label for="top_k">top_k</label><input id="top_k" type="number" step="1" min="0" placeholder="model default">
  <label for="max_tokens">max_tokens</label><input id="max_tokens" type="number" step="1" min="1" placeholder="up to the context">
  <label for="seed">seed</label><input id="seed" type="number" step="1" placeholder="random">
  <h3>Server</h3>
  <table id="stats">
    <tr><td>tokens/s (this reply)</td><td id="s_reply">–</td></tr>
    <tr><td>tokens/s (server)</td><td id="s_tps">–</td></tr>
    <tr><td>running / queued</td><td id="s_run">–</td></tr>
    <tr><td>KV cache</td><td id="s_kvfmt">–</td></tr>
    <tr><td>KV tokens / capacity</td><td id="s_kvtok">–</td></tr>
    <tr><td>KV bytes</td><td id="s_kvbytes">–</td></tr>
    <tr><td>KV bytes / token</td><td id="s_kvbpt">–</td></tr>
    <tr><td>memory (RSS)</td><td id="s_rss">–</td></tr>
  </table>
  <h3>Access</h3>
  <button type="button" class="secondary" id="key">Set API key</button>
</aside>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let messages = [];
let controller = null;

function apiKey() { return localStorage.getItem("tq_api_key") || ""; }
function headers() {
  const h = { "Content-Type": "application/json" };
  if (apiKey()) h["Authorization"] = "Bearer " + apiKey();
  return h;
}
function askKey() {
  const k = prompt("This server needs an API key (turboquant serve --api-key):", apiKey());
  if (k !== null) localStorage.setItem("tq_api_key", k.trim());
  return k !== null;
}
// fetch that asks for the key on 401 and retries once.
async function call(url, init = {}) {
  let r = await fetch(url, { ...init, headers: headers() });
  if (r.status === 401 && askKey()) r = await fetch(url, { ...init, headers: headers() });
  return r;
}

function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  $("log").appendChild(d);
  $("log").scrollTop = $("log").scrollHeight;
  return d;
}
function render() {
  $("log").textContent = "";
  for (const m of messages) bubble(m.role, m.content);
  localStorage.setItem("tq_chat", JSON.stringify(messages));
}
function num(id) { const v = $(id).value.trim(); return v === "" ? undefined : Number(v); }
function fmtBytes(b) {
  if (!(b >= 0)) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; ++i; }
  return b.toFixed(i ? 1 : 0) + " " + u[i];
}

async function send(text) {
  messages.push({ role: "user", content: text });
  render();
  const out = bubble("assistant", "");
  const meta = document.createElement("div"); meta.className = "meta"; out.after(meta);
  const body = { messages: [], stream: true, stream_options: { include_usage: true } };
  const sys = $("system").value.trim();
  if (sys) body.messages.push({ role: "system", content: sys });
  body.messages.push(...messages);
  for (const k of ["temperature", "top_p", "top_k", "max_tokens", "seed"]) {
    const v = num(k); if (v !== undefined && !Number.isNaN(v)) body[k] = v;
  }
  controller = new AbortController();
  $("send").disabled = true; $("stop").disabled = false;
  let reply = "", tokens = 0, first = 0, finish = "";
  const t0 = performance.now();
  try {
    const r = await call("/v1/chat/completions", { method: "POST", body: JSON.stringify(body),
                                                    signal: controller.signal });
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { msg = (await r.json()).error.message; } catch (e) {}
      throw new Error(msg);
    }
    const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) tokens = j.usage.completion_tokens;
        const c = j.choices && j.choices[0];
        if (!c) continue;
        if (c.delta && c.delta.content) {
          if (!first) first = performance.now();
          reply += c.delta.content; out.textContent = reply;
          $("log").scrollTop = $("log").scrollHeight;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
  } catch (e) {
    if (e.name === "AbortError") { finish = "stopped"; }
    else { out.className = "msg error"; out.textContent = (reply ? reply + "\n\n" : "") + "Error: " + e.message; }
  } finally {
    controller = null;
    $("send").disabled = false; $("stop").disabled = true;
  }
  const secs = first ? (performance.now() - first) / 1000 : 0;
  const tps = tokens > 1 && secs > 0 ? (tokens - 1) / secs : 0;
  meta.textContent = [finish, tokens ? tokens + " tokens" : "", tps ? tps.toFixed(1) + " tok/s" : ""]
      .filter(Boolean).join(" · ");
  if (tps) $("s_reply").textContent = tps.toFixed(1);
  if (out.className !== "msg error") messages.push({ role: "assistant", content: reply });
  localStorage.setItem("tq_chat", JSON.stringify(messages));
}

// Prometheus text -> {name{labels}: value}.
function parseMetrics(text) {
  const m = {};
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const sp = line.lastIndexOf(" ");
    m[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return m;
}
async function pollMetrics() {
  try {
    const r = await call("/metrics");
    if (r.ok) {
      const text = await r.text();
      const m = parseMetrics(text);
      const g = (k) => m["turboquant_" + k];
      $("s_tps").textContent = (g("tokens_per_second") || 0).toFixed(1);
      $("s_run").textContent = g("requests_running") + " / " + g("requests_queued");
      $("s_kvtok").textContent = g('kv_cache_tokens{state="all"}') + " / " + g("kv_cache_capacity_tokens");
      $("s_kvbytes").textContent = fmtBytes(g("kv_cache_bytes"));
      $("s_kvbpt").textContent = fmtBytes(g("kv_cache_bytes_per_token"));
      $("s_rss").textContent = fmtBytes(g("process_resident_memory_bytes"));
      const fmt = text.match(/turboquant_kv_cache_info\{cache="([^"]*)"\}/);
      if (fmt) $("s_kvfmt").textContent = fmt[1];
    }
  } catch (e) {}
  setTimeout(pollMetrics, 2000);
}
async function loadModel() {
  try {
    const r = await call("/v1/models");
    if (r.ok) $("model").textContent = (await r.json()).data[0].id;
  } catch (e) {}
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => { messages = []; render(); });
$("key").addEventListener("click", askKey);
for (const id of ["system", "temperature", "top_p", "top_k", "max_tokens", "seed"]) {
  $(id).value = localStorage.getItem("tq_set_" + id) || "";
  $(id).addEventListener("change", () => localStorage.setItem("tq_set_" + id, $(id).value));
}
try { messages = JSON.parse(localStorage.getItem("tq_chat") || "[]"); } catch (e) { messages = []; }
render();
loadModel();
pollMetrics();
</script>
</body>
</html>
)TQPAGE";

}  // namespace

std::string_view ChatPageHtml() { return {kHtml, sizeof(kHtml) - 1}; }

}  // namespace tq::server
