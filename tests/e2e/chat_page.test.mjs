// The chat page at "/" in a real browser: Debian's chromium driven by playwright-core. Sends a
// message and sees streamed text appear, stops a generation, reloads and sees the page still
// work (conversation kept), reads the metrics panel, and asks for the key under --api-key.
// Without chromium the test skips with the reason, except under CI=true where it fails.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { startServer } from './server.mjs';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const skip = !CHROMIUM && process.env.CI !== 'true'
  ? 'chromium is not installed (scripts/setup.sh installs it)' : false;

describe('chat page in chromium', { skip }, () => {
  let chromium;
  let browser;
  let server;
  before(async () => {
    assert.ok(CHROMIUM, 'chromium not found at /usr/bin/chromium (CI=true requires it)');
    ({ chromium } = await import('playwright-core'));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  test('send, stream, stop, reload', async () => {
    server = await startServer(['--parallel', '2', '--ctx', '2048']);
    const page = await browser.newPage();
    await page.goto(server.url + '/');
    await page.waitForFunction(() => document.getElementById('model').textContent.includes('tq-llama'));
    // A short reply streams in and finishes.
    await page.fill('#max_tokens', '24');
    await page.dispatchEvent('#max_tokens', 'change');
    await page.fill('#input', 'Once upon a time');
    await page.click('#send');
    await page.waitForFunction(() => {
      const m = document.querySelectorAll('.msg.assistant');
      return m.length === 1 && m[0].textContent.length > 0;
    });
    await page.waitForFunction(() => !document.getElementById('send').disabled);
    const meta = await page.textContent('.meta');
    assert.match(meta, /length/);
    // A long one is stopped while it streams.
    await page.fill('#max_tokens', '1500');
    await page.dispatchEvent('#max_tokens', 'change');
    await page.fill('#input', 'Tell me a long story');
    await page.click('#send');
    await page.waitForFunction(() => {
      const m = document.querySelectorAll('.msg.assistant');
      return m.length === 2 && m[1].textContent.length > 20;
    });
    await page.click('#stop');
    await page.waitForFunction(() => !document.getElementById('send').disabled);
    assert.match(await page.locator('.meta').last().textContent(), /stopped/);
    // The metrics panel filled from /metrics.
    await page.waitForFunction(() => document.getElementById('s_kvbpt').textContent !== '–');
    assert.match(await page.textContent('#s_kvfmt'), /\S/);
    // Reload: the conversation is still there and a new message still works.
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('.msg').length === 4);
    await page.fill('#max_tokens', '8');
    await page.dispatchEvent('#max_tokens', 'change');
    await page.fill('#input', 'Again');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 3 &&
                                     !document.getElementById('send').disabled);
    await page.close();
    await server.stop();
    server = null;
  });

  test('asks for the API key', async () => {
    server = await startServer(['--api-key', 'sesame']);
    const page = await browser.newPage();
    page.on('dialog', (d) => d.accept('sesame'));
    await page.goto(server.url + '/');
    await page.waitForFunction(() => document.getElementById('model').textContent.includes('tq-llama'));
    await page.fill('#max_tokens', '6');
    await page.dispatchEvent('#max_tokens', 'change');
    await page.fill('#input', 'Hello');
    await page.click('#send');
    await page.waitForFunction(() => {
      const m = document.querySelectorAll('.msg.assistant');
      return m.length === 1 && m[0].textContent.length > 0 && !document.getElementById('send').disabled;
    });
    assert.equal(await page.locator('.msg.error').count(), 0);
    await page.close();
  });
});
