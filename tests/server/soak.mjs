// A bounded soak of `colibri serve`: WORKERS concurrent clients mixing good requests (plain
// and streamed), bad ones, aborted streams and dropped connections for SECONDS seconds.
// Every answer must be one the request deserves; the server must stay up.
// usage: node soak.mjs PORT API_KEY SECONDS [WORKERS]
import net from 'node:net';

const [port, key, seconds, workers = 6] = process.argv.slice(2).map((x, i) => (i === 1 ? x : Number(x)));
const base = `http://127.0.0.1:${port}`;
const H = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
const end = Date.now() + seconds * 1000;
const counts = {};
let bad = 0;
const note = (k) => { counts[k] = (counts[k] || 0) + 1; };
function unexpected(what, got) { bad++; if (bad <= 10) console.log(`FAIL ${what}: ${JSON.stringify(got).slice(0, 300)}`); }
const chat = (extra) => JSON.stringify({ messages: [{ role: 'user', content: 'Tell me something.' }], max_tokens: 12, ...extra });

async function post(path, body, signal) {
  return fetch(base + path, { method: 'POST', headers: H, body, signal });
}
function rawClose(bytes) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => { if (bytes) s.write(bytes); setTimeout(() => s.destroy(), 20); });
    s.on('error', () => {});
    s.on('close', resolve);
  });
}
const cases = [
  async function goodChat() {
    const r = await post('/v1/chat/completions', chat({ temperature: 0.7, seed: Math.floor(Math.random() * 1e6) }));
    const j = await r.json();
    if (r.status === 503) return note('busy');
    if (r.status !== 200 || typeof j.choices[0].message.content !== 'string') return unexpected('good chat', [r.status, j]);
  },
  async function goodStream() {
    const r = await post('/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 12, stream: true }));
    const t = await r.text();
    if (r.status === 503) return note('busy');
    if (r.status !== 200 || !t.trimEnd().endsWith('data: [DONE]')) return unexpected('good stream', [r.status, t.slice(-200)]);
  },
  async function abortStream() {
    const ac = new AbortController();
    try {
      const r = await post('/v1/chat/completions', chat({ stream: true, max_tokens: 100, ignore_eos: true }), ac.signal);
      const rd = r.body.getReader();
      await rd.read();
      ac.abort();
    } catch { /* aborted */ }
  },
  async function badJson() {
    const r = await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": ');
    await r.text();
    if (r.status !== 400) unexpected('bad json', r.status);
  },
  async function wrongType() {
    const r = await post('/v1/chat/completions', chat({ max_tokens: 'many' }));
    await r.text();
    if (r.status !== 400) unexpected('wrong type', r.status);
  },
  async function tooBig() {
    const r = await post('/v1/chat/completions', 'x'.repeat(70000)).catch((e) => ({ status: 'closed', text: async () => '' }));
    await r.text();
    if (r.status !== 413 && r.status !== 'closed') unexpected('too big', r.status);
  },
  async function wrongKey() {
    const r = await fetch(base + '/v1/models', { headers: { Authorization: 'Bearer wrong' } });
    await r.text();
    if (r.status !== 401) unexpected('wrong key', r.status);
  },
  async function dropConnection() { await rawClose(Math.random() < 0.5 ? null : 'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 99\r\n\r\n{'); },
  async function observe() {
    const r = await fetch(base + (Math.random() < 0.5 ? '/metrics' : '/v1/experts'), { headers: H });
    await r.text();
    if (r.status !== 200) unexpected('metrics/experts', r.status);
  },
];
async function worker() {
  while (Date.now() < end) {
    const c = cases[Math.floor(Math.random() * cases.length)];
    try { await c(); note(c.name); } catch (e) { unexpected(c.name, String(e)); }
  }
}
await Promise.all(Array.from({ length: workers }, worker));
const h = await fetch(base + '/health');
if (h.status !== 200) unexpected('health after the soak', h.status);
console.log(`soak: ${JSON.stringify(counts)}`);
console.log(bad ? `soak: ${bad} unexpected answers` : 'soak: all answers as expected');
process.exit(bad ? 1 : 0);
