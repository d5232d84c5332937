// The dashboard's KV-cache-aware routing section in a real browser (Debian's chromium, driven by puppeteer-core): a
// kvaware router following a simulator's KV-cache events. The section shows the endpoint's stream connected and its
// blocks indexed, then the model's decisions by KV match and by fallback, as requests arrive, without a reload; and the
// model's tokenizer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { requireTool } from '../support/tools.js';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { launchChromium } from '../support/browser.js';
import { stopAll } from '../support/process.js';
import { call, FAST_PROBES, kvawareArgs, startRouter, startSim, type Running } from '../support/router.js';
import { within } from '../support/within.js';

const MODEL = 'kv-model';

function words(seed: string, n: number): string {
  return Array.from({ length: n }, (_, i) => `${seed}${i}`).join(' ');
}

describe("the dashboard's KV section in a browser", { timeout: 90_000, skip: requireTool('chromium') }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-kv-browser-'));
  let sim: Running;
  let router: Running;
  let browser: Browser;
  let page: Page;

  before(async () => {
    sim = await startSim(['--model', MODEL, '--kv-events-port', '0', '--kv-events-replay-port', '0']);
    // a second engine: with one candidate kvaware has nothing to decide and tokenizes nothing
    const other = await startSim(['--model', MODEL, '--kv-events-port', '0', '--kv-events-replay-port', '0']);
    router = await startRouter([...FAST_PROBES, ...kvawareArgs([sim, other], MODEL)]);
    browser = await within(30_000, 'chromium starts', launchChromium(path.join(dir, 'profile')));
    page = await browser.newPage();
  });
  after(async () => {
    await browser?.close();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the endpoint’s event stream connected with its blocks; the model’s decisions by KV match and fallback', async () => {
    await page.goto(`${router.url}/dashboard`, { waitUntil: 'load', timeout: 15_000 });
    const row = `tr[data-kv-endpoint="${sim.url}"]`;
    await page.waitForFunction((r) => document.querySelector(r)?.getAttribute('data-connected') === 'true', { timeout: 20_000 }, row);
    assert.equal(await page.$eval('#kv', (e) => (e as HTMLElement).hidden), false, 'the section shows');
    assert.match(await page.$eval(`${row} td:nth-child(2)`, (e) => e.textContent ?? ''), /^connected/);

    const shared = words('page', 100);
    const complete = async (prompt: unknown, base = router.url): Promise<void> => {
      const res = await call(`${base}/v1/completions`, { body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1 }) });
      assert.equal(res.status, 200, res.text);
    };
    // cached on this engine (sent to it straight)
    await complete(shared, sim.url);
    await page.waitForFunction(
      (r) => Number(document.querySelector(`${r} [data-kv-blocks]`)?.getAttribute('data-kv-blocks')) >= 6,
      { timeout: 20_000 },
      row,
    );
    for (let i = 0; i < 3; i++) await complete(`${shared} q${i}`);
    // a batch of prompts has no one token list: prefixaware takes it
    await complete(['a', 'b']);
    const model = `tr[data-kv-model="${MODEL}"]`;
    await page.waitForFunction(
      (r) => document.querySelector(r)?.textContent?.includes('unsupported-body 1') === true,
      { timeout: 20_000 },
      model,
    );
    const cells = await page.$$eval(`${model} td`, (tds) => tds.map((td) => td.textContent ?? ''));
    // the three prompts matched what the engine holds; the batch fell back
    assert.equal(cells[1], '4', cells.join(' | '));
    assert.equal(cells[2], '75%');
    assert.match(cells[3] ?? '', /^\d+% of the prompt$/);
    assert.match(cells[4] ?? '', /^25% .*unsupported-body 1/);
    assert.match(await page.$eval(`${row} td:nth-child(4)`, (e) => e.textContent ?? ''), /ago|just now/);
    // the model's tokenizer: the simulator serves it under its own name, which names no Hub repo: the engine, and why
    const tokenizer = await page.$$eval(`tr[data-kv-tokenizer="${MODEL}"] td`, (tds) => tds.map((td) => td.textContent ?? ''));
    assert.equal(tokenizer[1], "engine's /tokenize", tokenizer.join(' | '));
    assert.equal(tokenizer[3], 'engines');
    assert.match(tokenizer[4] ?? '', /names no Hub repo/);
    assert.equal(await page.$eval('#kv-warnings', (e) => (e as HTMLElement).hidden), true, 'no warning: the engine names its events');
  });
});
