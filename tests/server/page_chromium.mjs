// page_chromium.mjs BASE_URL: opens the built-in chat page in headless Chromium (the Debian
// package, through playwright-core), types a message, sends it and waits for a streamed reply.
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
  await page.goto(`${base}/`);
  assert.equal(await page.title(), 'tern chat');
  await page.fill('#in', 'Tell me a story about a dog');
  await page.click('#send');
  await page.waitForSelector('.msg.assistant.done', { timeout: 60000 });
  const text = (await page.textContent('.msg.assistant.done')).trim();
  assert.ok(text.length > 0, 'empty reply');
  assert.ok(!text.startsWith('error:'), text);
  assert.equal(await page.textContent('.msg.user'), 'Tell me a story about a dog');
  // a second turn carries the history
  await page.fill('#in', 'And then?');
  await page.press('#in', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant.done').length === 2, null, { timeout: 60000 });
  console.log(`chat page: reply shown (${JSON.stringify(text.slice(0, 40))}...)`);
} finally {
  await browser.close();
}
