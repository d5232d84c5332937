// The dashboard in a real browser (Debian's chromium, driven by puppeteer-core, which downloads no browser): a router
// with Kubernetes discovery in front of a simulator, a model woken from zero while the page is open. The page follows
// it from scaled-to-zero through loading to ready without a reload, shows the engine's start-up error as past once it
// is ready, and asks nothing of any other origin. The screenshot goes to the test's temp folder (docs/dashboard.png
// is taken by tools/dashboard-screenshot.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { launchChromium } from '../support/browser.js';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { addReadyPod, deployment } from '../support/kube-objects.js';
import { freePort, stopAll } from '../support/process.js';
import { FAST_PROBES, startRouter, startSim, type Running } from '../support/router.js';
import { within } from '../support/within.js';
import { requireTool } from '../support/tools.js';

const MODEL = 'demo-chat';

describe('the dashboard in a browser', { timeout: 90_000, skip: requireTool('chromium') }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-browser-'));
  let kube: FakeKube;
  let router: Running;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];
  let navigations = 0;

  /** The model's state as its row on the page says it. */
  const rowState = (model: string): Promise<string | null> =>
    page.evaluate((m) => document.querySelector(`tr[data-model="${m}"]`)?.getAttribute('data-state') ?? null, model);
  const waitForRow = (model: string, state: string, timeoutMs: number): Promise<unknown> =>
    page.waitForFunction(
      (m, s) => document.querySelector(`tr[data-model="${m}"]`)?.getAttribute('data-state') === s,
      { timeout: timeoutMs },
      model,
      state,
    );

  before(async () => {
    kube = await startFakeKube();
    kube.create(deployment('demo', 0, { labels: { model: MODEL } }));
    router = await startRouter(
      [
        '--service-discovery',
        'k8s',
        '--k8s-label-selector',
        'app=llm',
        '--known-models',
        'demo-embed',
        '--admin-port',
        '0',
        ...FAST_PROBES,
      ],
      { KUBECONFIG: kube.kubeconfigPath },
    );
    browser = await within(30_000, 'chromium starts', launchChromium(path.join(dir, 'profile')));
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('request', (r) => requested.push(r.url()));
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) navigations++;
    });
  });
  after(async () => {
    await browser?.close();
    await stopAll();
    await kube?.close();
    // the screenshot stays for whoever wants to look at it (the test says where); the browser profile goes
    rmSync(path.join(dir, 'profile'), { recursive: true, force: true });
  });

  test('a model goes from scaled-to-zero through loading to ready on the open page; the start-up error shows as past', async (t) => {
    await page.goto(`${router.adminUrl}/dashboard`, { waitUntil: 'load', timeout: 15_000 });
    await waitForRow(MODEL, 'scaled-to-zero', 15_000);
    assert.equal(await page.$eval('#connection', (e) => e.textContent), 'live');
    // every state the row shows from now on, in order (a script as text: tsx would wrap a named function in a helper
    // the page does not have)
    await page.evaluate(`(() => {
      const seen = [];
      window.seen = seen;
      const record = () => {
        const state = document.querySelector('tr[data-model="${MODEL}"]')?.getAttribute('data-state');
        if (state && seen.at(-1) !== state) seen.push(state);
      };
      record();
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true });
    })()`);

    // the autoscaler wakes the model: the Deployment wants a replica, then its pod is Ready before its engine listens
    kube.patch('deployments', 'default', 'demo', { spec: { replicas: 1 } });
    await waitForRow(MODEL, 'loading', 15_000);
    const port = await freePort();
    const endpoint = `http://127.0.0.1:${port}`;
    addReadyPod(kube, 'demo-1', MODEL, port);
    const errorCell = (kind: string): Promise<unknown> =>
      page.waitForFunction(
        (url, k) => document.querySelector(`tr[data-endpoint="${url}"] [data-error]`)?.getAttribute('data-error') === k,
        { timeout: 15_000 },
        endpoint,
        kind,
      );
    await errorCell('current');
    assert.match(await page.$eval(`tr[data-endpoint="${endpoint}"] [data-error]`, (e) => e.textContent ?? ''), /ECONNREFUSED/);
    // the engine starts, and loads its model for a second
    await startSim(['--model', MODEL, '--startup-loading-seconds', '1'], { port });
    await waitForRow(MODEL, 'ready', 30_000);

    assert.deepEqual(await page.evaluate(() => (window as unknown as { seen: string[] }).seen), ['scaled-to-zero', 'loading', 'ready']);
    assert.equal(navigations, 1, 'the page was never reloaded');
    assert.equal(await rowState('demo-embed'), 'scaled-to-zero');

    await errorCell('past');
    const shown = await page.$eval(`tr[data-endpoint="${endpoint}"] [data-error]`, (e) => e.textContent ?? '');
    assert.match(shown, /^past/, `the engine's start-up error is history once it is ready: ${shown}`);
    const timeline = await page.$$eval('#timeline li', (items) => items.map((li) => `${li.getAttribute('data-type')} ${li.textContent}`));
    assert.ok(
      timeline.some((t) => t.startsWith('model-state') && t.includes(`${MODEL}: loading → ready`)),
      timeline.join('\n'),
    );
    assert.ok(timeline.some((t) => t.startsWith('cold-start') && t.includes(MODEL)));

    const origin = new URL(router.adminUrl).origin;
    const foreign = requested.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
    assert.deepEqual(foreign, [], 'nothing from another origin');

    const shot = path.join(dir, 'dashboard.png');
    await page.screenshot({ path: shot, fullPage: true });
    const png = readFileSync(shot);
    assert.ok(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) && png.length > 10_000);
    t.diagnostic(`screenshot: ${shot}`);
  });
});
