// page_chromium.mjs BASE_URL: opens the built-in chat page in headless Chromium (the Debian
// package, through playwright-core), types a message, sends it and waits for a streamed reply.
// Every request the page sends carries the reply cap of its "max tokens" field (512 unless
// edited); with a small cap a conversation of several turns fits the test server's context.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';

const base = process.argv[2];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  const sent = [];   // the JSON bodies of the page's completion requests, in order
  page.on('request', (req) => {
    if (req.method() === 'POST' && req.url().endsWith('/v1/chat/completions')) sent.push(req.postDataJSON());
  });
  await page.goto(`${base}/`);
  assert.equal(await page.title(), 'tern chat');
  assert.equal(await page.inputValue('#maxtok'), '512');
  await page.fill('#in', 'Tell me a story about a dog');
  await page.click('#send');
  await page.waitForSelector('.msg.assistant.done', { timeout: 60000 });
  const text = (await page.textContent('.msg.assistant.done')).trim();
  assert.ok(text.length > 0, 'empty reply');
  assert.ok(!text.startsWith('error:'), text);
  assert.equal(await page.textContent('.msg.user'), 'Tell me a story about a dog');
  assert.equal(sent.length, 1);
  assert.equal(sent[0].max_tokens, 512);
  // a fresh conversation with a cap of 16: three turns, each carrying the history and the cap,
  // none refused for the context
  await page.click('#clear');
  await page.fill('#maxtok', '16');
  const turns = ['Tell me about a cat', 'And then?', 'What happened next?'];
  for (let t = 0; t < turns.length; t++) {
    await page.fill('#in', turns[t]);
    await page.press('#in', 'Enter');
    await page.waitForFunction((n) => document.querySelectorAll('.msg.assistant.done').length === n, t + 1,
                                { timeout: 60000 });
    const reply = (await page.locator('.msg.assistant.done').nth(t).textContent()).trim();
    assert.ok(!reply.startsWith('error:'), `turn ${t + 1}: ${reply}`);
    const body = sent[1 + t];
    assert.equal(body.max_tokens, 16);
    assert.equal(body.messages.length, 2 * t + 1);
  }
  // an emptied field sends no cap
  await page.fill('#maxtok', '');
  await page.click('#clear');
  await page.fill('#in', 'Hello');
  await page.press('#in', 'Enter');
  await page.waitForSelector('.msg.assistant.done', { timeout: 60000 });
  assert.equal(sent.length, 5);
  assert.equal(sent[4].max_tokens, undefined);
  console.log(`chat page: reply shown (${JSON.stringify(text.slice(0, 40))}...), max_tokens sent: ${sent.map((b) => b.max_tokens).join(',')}`);
} finally {
  await browser.close();
}
