// The web page of `colibri serve` in headless Chromium (Debian's, driven by playwright-core):
// load /, give the key, send a message, see the reply stream in and the expert view update.
// usage: node page.mjs PORT API_KEY SCREENSHOT.png
import { chromium } from 'playwright-core';

const [port, key, shot] = process.argv.slice(2);
let failures = 0;
function check(cond, what, detail) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${!cond && detail !== undefined ? ': ' + JSON.stringify(detail).slice(0, 300) : ''}`);
  if (!cond) failures++;
}
const exe = process.env.CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({ executablePath: exe, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/`);
  check((await page.title()) === 'colibri', 'the page loads');
  await page.fill('#key', key);
  await page.dispatchEvent('#key', 'change');
  const step0 = Number(await page.getAttribute('#experts', 'data-step'));
  // count the updates of the reply as it streams
  await page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver((ms) => { for (const m of ms) if (m.target.classList && m.target.classList.contains('assistant')) window.__updates++; })
      .observe(document.getElementById('log'), { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#maxtok', '128');
  await page.fill('#temp', '0');
  // The server sends, in one event, the text made while the client was not reading: the
  // bundled model makes 128 tokens in well under 0.1 s, so a busy browser may read them all at
  // once. One update in one reply is therefore possible with a streaming server; one update
  // in each of three replies is not a stream. Each attempt starts from an empty log.
  let updates = 0, reply = null, attempts = 0;
  for (; attempts < 3 && updates < 2; attempts++) {
    await page.click('#clear');
    await page.evaluate(() => { window.__updates = 0; });
    await page.fill('#input', 'Tell me a story about a bird.');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelector('.msg.assistant') && !document.getElementById('send').disabled, null, { timeout: 60000 });
    reply = await page.textContent('.msg.assistant');
    updates = await page.evaluate(() => window.__updates);
  }
  check(reply && reply.length > 0 && !(await page.$('.msg.error')), 'the reply arrives', reply);
  check(updates >= 2, 'the reply streamed in (several updates)', { updates, attempts });
  await page.waitForFunction((s) => Number(document.getElementById('experts').dataset.step) > s, step0, { timeout: 10000 }).catch(() => {});
  const step1 = Number(await page.getAttribute('#experts', 'data-step'));
  check(step1 > step0, 'the expert view updated', [step0, step1]);
  const picks = await page.textContent('#lastlist');
  check(/layer \d+: \d/.test(picks), 'the expert view names the chosen experts', picks.slice(0, 200));
  const model = await page.textContent('#model');
  check(/colibri-tiny/.test(model), 'the page shows the model', model);
  check(errors.length === 0, 'no script errors', errors);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`screenshot: ${shot}`);
} finally {
  await browser.close();
}
console.log(failures ? `page: ${failures} failed` : 'page: all passed');
process.exit(failures ? 1 : 0);
