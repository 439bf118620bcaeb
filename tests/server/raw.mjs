// Bad input to `colibri serve` over raw sockets: each case must get its 4xx (or a closed
// connection) and the server must answer /health right after.
// usage: node raw.mjs PORT API_KEY MAX_BODY QUEUE PARALLEL
import net from 'node:net';

const [port, key, maxBody, queue, parallel] = process.argv.slice(2).map((x, i) => (i === 1 ? x : Number(x)));
let failures = 0;
function check(cond, what, detail) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${!cond && detail !== undefined ? ': ' + JSON.stringify(detail).slice(0, 400) : ''}`);
  if (!cond) failures++;
}

// Sends raw bytes, resolves with the whole answer (the server closes or we time out).
function raw(bytes, { closeAfterSend = false, timeout = 10000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const chunks = [];
    const t = setTimeout(() => { s.destroy(); resolve(Buffer.concat(chunks)); }, timeout);
    s.on('connect', () => {
      if (bytes.length) s.write(bytes);
      if (closeAfterSend) { s.end(); }
    });
    s.on('data', (d) => chunks.push(d));
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(t); resolve(Buffer.concat(chunks)); });
  });
}
const auth = `Authorization: Bearer ${key}\r\n`;
function req(method, path, body, { headers = auth, ctype = 'application/json' } = {}) {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body ?? '');
  const head = `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}` +
               (body !== undefined ? `Content-Type: ${ctype}\r\nContent-Length: ${b.length}\r\n` : '') + '\r\n';
  return raw(Buffer.concat([Buffer.from(head), b]));
}
function parse(buf) {
  const s = buf.toString('latin1');
  const m = s.match(/^HTTP\/1\.[01] (\d{3})/);
  const i = s.indexOf('\r\n\r\n');
  let body = i >= 0 ? buf.subarray(i + 4).toString('utf8') : '';
  if (/transfer-encoding: chunked/i.test(s.slice(0, i))) body = body.replace(/^[0-9a-f]+\r\n/gim, '').replace(/\r\n/g, '');
  return { status: m ? Number(m[1]) : 0, head: i >= 0 ? s.slice(0, i) : s, body };
}
async function health(after) {
  const r = parse(await req('GET', '/health', undefined, { headers: '' }));
  check(r.status === 200 && /"ok"/.test(r.body), `  /health after ${after}`, r.status);
}
async function expect(what, status, method, path, body, opts) {
  const r = parse(await req(method, path, body, opts));
  let shape = true;
  if (status >= 400) {
    try { const j = JSON.parse(r.body); shape = typeof j.error.message === 'string' && typeof j.error.type === 'string' && 'code' in j.error; }
    catch { shape = false; }
  }
  check(r.status === status && shape, `${what}: ${status}`, [r.status, r.body]);
  await health(what);
  return r;
}
const C = '/v1/chat/completions';
const good = (extra = {}) => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

await expect('a good request', 200, 'POST', C, good());
await expect('malformed JSON', 400, 'POST', C, '{"messages": [');
await expect('not an object', 400, 'POST', C, '[1,2]');
await expect('empty body', 400, 'POST', C, '');
await expect('missing messages', 400, 'POST', C, '{"max_tokens": 3}');
await expect('messages not an array', 400, 'POST', C, '{"messages": "hi"}');
await expect('message without content', 400, 'POST', C, '{"messages": [{"role": "user"}]}');
await expect('bad role', 400, 'POST', C, '{"messages": [{"role": 7, "content": "x"}]}');
await expect('max_tokens a string', 400, 'POST', C, good({ max_tokens: 'x' }));
await expect('max_tokens huge', 400, 'POST', C, good({ max_tokens: 1e300 }));
await expect('max_tokens negative', 400, 'POST', C, good({ max_tokens: -1 }));
await expect('seed huge', 400, 'POST', C, good({ seed: 1e30 }));
await expect('temperature a string', 400, 'POST', C, good({ temperature: 'hot' }));
await expect('stream a number', 400, 'POST', C, good({ stream: 1 }));
await expect('stop of numbers', 400, 'POST', C, good({ stop: [1, 2] }));
await expect('unknown field', 400, 'POST', C, good({ frobnicate: true }));
await expect('n = 2', 400, 'POST', C, good({ n: 2 }));
await expect('tools', 400, 'POST', C, good({ tools: [] }));
await expect('deeply nested JSON', 400, 'POST', C, '['.repeat(20000) + ']'.repeat(20000));
await expect('invalid UTF-8 in a string', 400, 'POST', C,
             Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"a'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]));
await expect('overlong UTF-8', 400, 'POST', C,
             Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}]}')]));
await expect('a lone surrogate escape', 400, 'POST', C, '{"messages":[{"role":"user","content":"\\ud800"}]}');
await expect('a prompt longer than the context', 400, 'POST', C, good({ messages: [{ role: 'user', content: 'word '.repeat(2000) }] }));
await expect('oversized body', 413, 'POST', C, Buffer.alloc(maxBody + 1000, 0x20));
await expect('wrong key', 401, 'POST', C, good(), { headers: 'Authorization: Bearer nope\r\n' });
await expect('no key', 401, 'GET', '/v1/models', undefined, { headers: '' });
await expect('a key of another length', 401, 'GET', '/metrics', undefined, { headers: `Authorization: Bearer ${key}x\r\n` });
await expect('unknown route', 404, 'GET', '/v2/nothing', undefined);
await expect('unknown route (POST)', 404, 'POST', '/v1/embeddings', '{}');
await expect('wrong method', 405, 'GET', C, undefined);
await expect('tokenize: content a number', 400, 'POST', '/tokenize', '{"content": 5}');
await expect('detokenize: negative id', 400, 'POST', '/detokenize', '{"tokens": [-1]}');
await expect('detokenize: huge id', 400, 'POST', '/detokenize', '{"tokens": [1e10]}');
await expect('completions: prompt of bad ids', 400, 'POST', '/v1/completions', '{"prompt": [1, 99999999]}');
const t = await expect('tokenize', 200, 'POST', '/tokenize', '{"content": "Hello world"}');
const ids = JSON.parse(t.body).tokens;
const d = await expect('detokenize', 200, 'POST', '/detokenize', JSON.stringify({ tokens: ids }));
check(JSON.parse(d.body).content === 'Hello world', 'tokenize / detokenize round trip', d.body);

// chunked upload beyond the limit
{
  const piece = Buffer.alloc(16384, 0x20);
  let body = Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
  const parts = [body];
  for (let n = 0; n <= maxBody; n += piece.length) parts.push(Buffer.from(piece.length.toString(16) + '\r\n'), piece, Buffer.from('\r\n'));
  parts.push(Buffer.from('0\r\n\r\n'));
  const r = parse(await raw(Buffer.concat(parts)));
  check(r.status === 413, 'oversized chunked body: 413', r.status);
  await health('oversized chunked body');
}
// connections that say nothing, or half a request, then go away
await raw(Buffer.alloc(0), { closeAfterSend: true });
await health('open and close without a request');
await raw(Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le'), { closeAfterSend: true });
await health('half the headers, then close');
await raw(Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 500\r\n\r\n{"messages":`), { closeAfterSend: true });
await health('half the body, then close');
await raw(Buffer.from('\x00\x01\x02 garbage\r\n\r\n'));
await health('binary garbage');
{
  const r = parse(await raw(Buffer.from('GET /health HTTP/1.0\r\n\r\n')));
  check(r.status === 200, 'HTTP/1.0 request', r.status);
}
{
  const r = parse(await raw(Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200000)}\r\n\r\n`)));
  check(r.status >= 400 && r.status < 500 || r.status === 0, 'huge header: refused', r.status);
  await health('huge header');
}

// the queue: beyond PARALLEL running and QUEUE waiting a request is refused with 503 and
// x-should-retry: true; a burst of many long requests at once must see both kinds of answer
{
  const long = JSON.stringify({ messages: [{ role: 'user', content: 'story' }], max_tokens: 200, ignore_eos: true, stream: true });
  const burst = 4 * (parallel + queue) + 8;
  const answers = await Promise.all(Array.from({ length: burst }, () => req('POST', C, long).then(parse)));
  const ok = answers.filter((r) => r.status === 200).length;
  const busy = answers.filter((r) => r.status === 503 && /x-should-retry: true/i.test(r.head) && /server_busy/.test(r.body)).length;
  check(ok >= parallel && busy >= 1 && ok + busy === burst, `a burst of ${burst}: 200 or 503 with x-should-retry: true`, [ok, busy, burst]);
  check(answers.filter((r) => r.status === 200).every((r) => r.body.trimEnd().endsWith('data: [DONE]')), 'the burst: every stream ends');
  await health('the burst');
  await expect('a good request after the burst', 200, 'POST', C, good());
}

console.log(failures ? `raw: ${failures} failed` : 'raw: all passed');
process.exit(failures ? 1 : 0);
