// The OpenAI-compatible API of `colibri serve` through the official `openai` JavaScript client.
// usage: node client.mjs BASE_URL API_KEY     (BASE_URL = http://127.0.0.1:PORT/v1)
// Prints one line per check; exits 1 when any failed.
import OpenAI from 'openai';

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 120000 });
const root = base.replace(/\/v1$/, '');
let failures = 0;
function check(cond, what, detail) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${!cond && detail !== undefined ? ': ' + JSON.stringify(detail) : ''}`);
  if (!cond) failures++;
}
async function metric(name) {
  const r = await fetch(`${root}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  const m = (await r.text()).match(new RegExp(`^colibri_${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const models = await client.models.list();
const model = models.data[0].id;
check(models.data.length === 1 && typeof model === 'string', 'GET /v1/models lists the model', models.data);

const msgs = (t) => [{ role: 'system', content: 'You are a storyteller.' }, { role: 'user', content: t }];
const chatReq = (t, extra = {}) => ({ model, messages: msgs(t), max_tokens: 24, temperature: 0, ...extra });

// chat, not streamed
const c1 = await client.chat.completions.create(chatReq('Tell me about the sea.'));
const text1 = c1.choices[0].message.content;
check(c1.object === 'chat.completion' && c1.choices[0].message.role === 'assistant', 'chat: shape');
check(typeof text1 === 'string' && text1.length > 0, 'chat: text', text1);
check(['stop', 'length'].includes(c1.choices[0].finish_reason), 'chat: finish_reason', c1.choices[0].finish_reason);
check(c1.usage.prompt_tokens > 5 && c1.usage.completion_tokens > 0 && c1.usage.completion_tokens <= 24 &&
      c1.usage.total_tokens === c1.usage.prompt_tokens + c1.usage.completion_tokens, 'chat: usage', c1.usage);

// chat, streamed: same text, role chunk first, usage chunk with empty choices
async function streamChat(req, onChunk) {
  const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', roleFirst = null, finish = null, usage = null, n = 0, afterUsage = 0;
  for await (const ch of s) {
    n++;
    if (usage) afterUsage++;
    if (ch.usage) { usage = ch.usage; check(ch.choices.length === 0, 'stream: the usage chunk has empty choices'); continue; }
    const d = ch.choices[0].delta;
    if (roleFirst === null) roleFirst = d.role === 'assistant';
    if (d.content) text += d.content;
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    if (onChunk && onChunk(n, s) === false) break;
  }
  return { text, roleFirst, finish, usage, n, afterUsage };
}
const s1 = await streamChat(chatReq('Tell me about the sea.'));
check(s1.text === text1, 'chat stream: same text as not streamed', [s1.text, text1]);
check(s1.roleFirst === true, 'chat stream: the first chunk carries the role');
check(s1.finish === c1.choices[0].finish_reason, 'chat stream: finish_reason chunk', s1.finish);
check(s1.usage && s1.usage.completion_tokens === c1.usage.completion_tokens && s1.usage.prompt_tokens === c1.usage.prompt_tokens,
      'chat stream: usage chunk', s1.usage);
check(s1.afterUsage === 0, 'chat stream: usage is the last chunk');

// completions, streamed and not
const p1 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0 });
const ptext = p1.choices[0].text;
check(p1.object === 'text_completion' && ptext.length > 0, 'completions: text', ptext);
check(p1.usage.prompt_tokens > 0 && p1.usage.completion_tokens > 0, 'completions: usage', p1.usage);
let ps = '', pusage = null;
for await (const ch of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0,
                                                          stream: true, stream_options: { include_usage: true } })) {
  if (ch.usage) pusage = ch.usage;
  if (ch.choices.length) ps += ch.choices[0].text;
}
check(ps === ptext, 'completions stream: same text', [ps, ptext]);
check(pusage && pusage.completion_tokens === p1.usage.completion_tokens, 'completions stream: usage', pusage);

// stop strings: cut where the greedy text has the stop string, finish_reason stop
const cut = ptext.length >= 12 ? ptext.slice(8, 12) : ptext.slice(-2);
const want = ptext.slice(0, ptext.indexOf(cut));
const ps1 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0, stop: [cut] });
check(ps1.choices[0].text === want && ps1.choices[0].finish_reason === 'stop', 'stop string (completions)', [ps1.choices[0].text, want, cut]);
let ps2 = '';
for await (const ch of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0,
                                                          stop: cut, stream: true }))
  if (ch.choices.length) ps2 += ch.choices[0].text;
check(ps2 === want, 'stop string (streamed)', [ps2, want]);
const ccut = text1.length >= 8 ? text1.slice(4, 8) : text1.slice(-1);
const cs = await client.chat.completions.create(chatReq('Tell me about the sea.', { stop: [ccut, 'zzzz'] }));
check(cs.choices[0].message.content === text1.slice(0, text1.indexOf(ccut)) && cs.choices[0].finish_reason === 'stop',
      'stop string (chat)', [cs.choices[0].message.content, ccut]);

// seed reproducibility: same seed, same text, at temperature 1
const seeded = (seed) => client.chat.completions.create(chatReq('Say something.', { temperature: 1.0, top_p: 0.95, seed, max_tokens: 32 }));
const r1 = await seeded(1234), r2 = await seeded(1234);
check(r1.choices[0].message.content === r2.choices[0].message.content, 'seed: same seed, same text', [r1.choices[0].message.content, r2.choices[0].message.content]);
const others = await Promise.all([5, 6, 7].map((s) => seeded(s)));
check(others.some((o) => o.choices[0].message.content !== r1.choices[0].message.content), 'seed: other seeds give other texts');

// logprobs
const lp = await client.chat.completions.create(chatReq('Tell me about the sea.', { logprobs: true, top_logprobs: 3 }));
const lpc = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
check(lp.choices[0].message.content === text1, 'logprobs: the text does not change');
check(Array.isArray(lpc) && lpc.length === lp.usage.completion_tokens - (lp.choices[0].finish_reason === 'stop' ? 1 : 0) &&
      lpc.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 && t.top_logprobs[0].logprob >= t.logprob - 1e-6),
      'logprobs: one entry per token, 3 alternatives, the greedy token the best', lpc && lpc.slice(0, 2));
check(Array.isArray(lpc) && lpc.map((t) => Buffer.from(t.bytes).toString('utf8')).join('') === text1, 'logprobs: bytes spell the text');

// 4 concurrent streams = the same requests one at a time (greedy)
const topics = ['the moon', 'a dragon', 'the forest', 'a small boat'];
const seq = [];
for (const t of topics) seq.push((await streamChat(chatReq(`Tell me about ${t}.`, { max_tokens: 40 }))).text);
const par = await Promise.all(topics.map((t) => streamChat(chatReq(`Tell me about ${t}.`, { max_tokens: 40 }))));
check(par.every((r, i) => r.text === seq[i]), '4 concurrent streams equal the sequential texts', par.map((r, i) => [r.text, seq[i]]));
check(new Set(seq).size > 1, 'the 4 prompts give different texts');
check((await metric('decode_steps_total')) > 0 && (await metric('moe_experts_run_total')) > 0, 'metrics: steps and experts counted');

// abort mid-stream: the slot is freed
const cancelled0 = await metric('requests_cancelled_total');
const ac = new AbortController();
let got = 0;
try {
  const s = await client.chat.completions.create({ ...chatReq('Tell me a long story.'), max_tokens: 200, ignore_eos: true, stream: true },
                                                 { signal: ac.signal });
  for await (const ch of s) { if (ch.choices.length && ch.choices[0].delta.content) got++; if (got === 3) ac.abort(); }
} catch (e) { /* the abort */ }
check(got >= 3, 'abort: got chunks before aborting', got);
let freed = false;
for (let i = 0; i < 50 && !freed; i++) {
  await sleep(100);
  freed = (await metric('slots_busy')) === 0 && (await metric('requests_cancelled_total')) === cancelled0 + 1;
}
check(freed, 'abort: the request is cancelled and its slot free', [await metric('slots_busy'), await metric('requests_cancelled_total'), cancelled0]);
const after = await client.chat.completions.create(chatReq('Tell me about the sea.'));
check(after.choices[0].message.content === text1, 'abort: the server answers as before');

// errors through the client
async function expectError(p, status, what) {
  try { await p; check(false, what, 'no error'); } catch (e) {
    check(e.status === status && e.error && typeof e.error.message === 'string', what, [e.status, e.error]);
  }
}
// prompt reuse: a slot keeps its KV cache; a request that starts with what it holds evaluates
// only the rest, and answers exactly as from an empty cache
{
  const cached = (r) => (r.usage.prompt_tokens_details || {}).cached_tokens;
  const r = chatReq('Tell me about the stars.', { max_tokens: 16 });
  const evaluated0 = await metric('prompt_tokens_total'), reused0 = await metric('prompt_tokens_cached_total');
  const a = await client.chat.completions.create(r);
  const b = await client.chat.completions.create(r);
  const c = await client.chat.completions.create({ ...r, cache_prompt: false });
  check(b.choices[0].message.content === a.choices[0].message.content && c.choices[0].message.content === a.choices[0].message.content,
        'prompt reuse: the same text with and without the cache', [a.choices[0].message.content, b.choices[0].message.content, c.choices[0].message.content]);
  check(cached(b) === b.usage.prompt_tokens - 1, 'prompt reuse: a repeated prompt evaluates only its last token', [cached(b), b.usage.prompt_tokens]);
  check(cached(c) === 0, 'prompt reuse: cache_prompt false evaluates the whole prompt', cached(c));
  const reused = (await metric('prompt_tokens_cached_total')) - reused0, evaluated = (await metric('prompt_tokens_total')) - evaluated0;
  check(reused === cached(a) + cached(b) && evaluated === 3 * a.usage.prompt_tokens - reused, 'prompt reuse: metrics count the reused and evaluated tokens',
        [reused, evaluated, cached(a), cached(b), a.usage.prompt_tokens]);
  // a chat's next turn starts with the previous turn's prompt and reply
  const turn2 = { ...r, messages: [...r.messages, { role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'And the sun?' }] };
  const t2 = await client.chat.completions.create(turn2);
  const t2fresh = await client.chat.completions.create({ ...turn2, cache_prompt: false });
  check(cached(t2) >= a.usage.prompt_tokens - 1 && cached(t2) < t2.usage.prompt_tokens, 'prompt reuse: the next turn reuses the first turn', [cached(t2), a.usage.prompt_tokens, t2.usage.prompt_tokens]);
  check(t2.choices[0].message.content === t2fresh.choices[0].message.content, 'prompt reuse: the next turn answers as from an empty cache',
        [t2.choices[0].message.content, t2fresh.choices[0].message.content]);
  await expectError(client.chat.completions.create({ ...r, cache_prompt: 1 }), 400, 'cache_prompt not a boolean: 400');
}

await expectError(client.chat.completions.create({ ...chatReq('x'), model: 'no-such-model' }), 404, 'unknown model: 404');
await expectError(client.chat.completions.create({ ...chatReq('x'), response_format: { type: 'json_object' } }), 400, 'response_format json_object: 400');
await expectError(client.chat.completions.create({ ...chatReq('x'), temperature: 7 }), 400, 'temperature out of range: 400');
await expectError(new OpenAI({ baseURL: base, apiKey: 'wrong', maxRetries: 0 }).models.list(), 401, 'wrong key: 401');

console.log(failures ? `client: ${failures} failed` : 'client: all passed');
process.exit(failures ? 1 : 0);
