// Takes docs/dashboard.png: a router in front of simulators in several states (a model ready with an endpoint still
// refusing, one loading, one at zero with requests held), some traffic, and the page in Debian's chromium.
//   npm run --silent build && node --import tsx tools/dashboard-screenshot.ts docs/dashboard.png
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { launchChromium } from '../test/support/browser.js';
import { freePort, stopAll } from '../test/support/process.js';
import { call, chat, startRouter, startSim } from '../test/support/router.js';

const out = process.argv[2] ?? 'docs/dashboard.png';
const ready = await freePort();
await startSim(['--model', 'llama-3-8b', '--startup-refuse-seconds', '1'], { port: ready, waitListening: false });
const loading = await freePort();
await startSim(['--model', 'qwen3-32b', '--startup-loading-seconds', '600'], { port: loading, waitListening: false });
const refusing = await freePort();
const router = await startRouter([
  '--static-backends',
  [ready, loading, refusing].map((p) => `http://127.0.0.1:${p}`).join(','),
  '--static-models',
  'llama-3-8b,qwen3-32b,llama-3-8b',
  '--static-aliases',
  'gpt-4o-mini:llama-3-8b',
  '--known-models',
  'mixtral-8x7b',
  '--cold-start-wait-per-model',
  'mixtral-8x7b=120,qwen3-32b=120',
  '--probe-interval',
  '0.5',
]);
const profile = mkdtempSync(path.join(os.tmpdir(), 'dashboard-shot-'));
const browser = await launchChromium(profile);
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 1000 });
  await page.goto(`${router.url}/dashboard`);
  const send = (model: string, timeoutMs = 10_000) =>
    call(`${router.url}/v1/chat/completions`, { body: chat(model), timeoutMs }).catch(() => undefined);
  for (let i = 0; i < 12; i++) {
    await Promise.all([send('llama-3-8b'), send('gpt-4o-mini'), send('lama-3-8b')]);
    // held until the picture is taken
    if (i % 4 === 0) for (const m of ['mixtral-8x7b', 'qwen3-32b']) void send(m, 60_000);
    await sleep(500);
  }
  await sleep(2_500);
  await page.screenshot({ path: out, fullPage: true });
  console.log(`dashboard screenshot: ${out}`);
} finally {
  await browser.close();
  await stopAll();
  rmSync(profile, { recursive: true, force: true });
}
