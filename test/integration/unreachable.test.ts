// Issue 25: an engine URL nobody listens on is said out loud (a WARN line naming it, a 503 and /v1/models saying
// unreachable), and an engine that comes up there later turns ready with an INFO line. An engine refusing only in its
// first seconds (still starting) stays "loading". Issue 32: the client learns "unreachable for N s"; the address and
// the error are in /engines and the log only.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { freePort, stopAll } from '../support/process.js';
import { call, chat, FAST_PROBES, startRouter, startSim, waitModelStatus } from '../support/router.js';
import { until } from '../support/within.js';

describe('an unreachable engine', { timeout: 90_000 }, () => {
  after(stopAll);

  test('a URL nobody listens on: WARN naming it within 20 s, 503 unreachable; a sim started there later turns ready and is logged', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const router = await startRouter(['--static-backends', url, '--static-models', 'typo', ...FAST_PROBES]);
    const started = Date.now();
    // within its first seconds it is loading, as an engine that is still starting
    const early = await call(`${router.url}/v1/chat/completions`, { body: chat('typo') });
    assert.equal(early.status, 503);
    assert.match(early.text, /\(loading\)/);

    await until('a WARN line naming the endpoint', () => /"level":40[^\n]*engine unreachable/.test(router.proc.output()), 20_000);
    assert.ok(Date.now() - started < 20_000);
    const warn = router.proc
      .output()
      .split('\n')
      .find((l) => l.includes('engine unreachable')) as string;
    assert.ok(warn.includes(`"endpoint":"${url}"`), warn);
    assert.match(warn, /ECONNREFUSED/);

    // the client learns that it is unreachable and for how long; the address and the error are the operator's
    const res = await call(`${router.url}/v1/chat/completions`, { body: chat('typo') });
    assert.equal(res.status, 503);
    const message = (res.json() as { error: { message: string } }).error.message;
    assert.match(message, /no ready engine \(unreachable for \d+ s\); retry after \d+ s\.$/);
    assert.ok(!res.text.includes(`127.0.0.1:${port}`) && !/ECONNREFUSED|refused/.test(res.text), res.text);
    const listed = await call(`${router.url}/v1/models`);
    const models = listed.json() as { data: { id: string; reason?: string }[] };
    assert.match(models.data.find((m) => m.id === 'typo')?.reason ?? '', /^unreachable for \d+ s$/);
    assert.ok(!listed.text.includes(`127.0.0.1:${port}`), listed.text);
    const engines = (await call(`${router.url}/engines`)).json() as {
      endpoints: { url: string; lastError: string | null }[];
      models: { id: string; unreachable?: string }[];
    };
    assert.equal(engines.endpoints[0]?.url, url);
    assert.match(engines.endpoints[0]?.lastError ?? '', /ECONNREFUSED/);
    assert.match(
      engines.models.find((m) => m.id === 'typo')?.unreachable ?? '',
      new RegExp(`^${url.replace(/\./g, '\\.')}: connection refused \\(/v1/models: ECONNREFUSED\\) for \\d+ s$`),
    );
    // once, not once per probe
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(router.proc.output().split('engine unreachable').length - 1, 1);

    const sim = await startSim(['--model', 'typo'], { port });
    await waitModelStatus(router.url, 'typo', 'ready', 15_000);
    await until('an INFO line that it answers again', () => /"level":30[^\n]*engine reachable again/.test(router.proc.output()));
    const ok = await call(`${router.url}/v1/chat/completions`, { body: chat('typo') });
    assert.equal(ok.status, 200);
    const after = (await call(`${router.url}/v1/models`)).json() as { data: { id: string; reason?: string }[] };
    assert.equal(after.data.find((m) => m.id === 'typo')?.reason, undefined);
    await sim.stop();
    await router.stop();
  });
});
