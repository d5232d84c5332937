// `llm-router sim` as a real process: load phases in order for each engine kind, help, flags, signals.
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { freePort, startCli, stopAll } from '../support/process.js';
import { simStats, startSim } from '../support/router.js';
import { until } from '../support/within.js';

after(stopAll);

type Observation = 'refused' | 'loading' | 'ready' | 'unexpected';
/** The phase changed between the two requests of one observation (loading, then ready): look again. */
type Between = 'between';

async function get(url: string): Promise<{ status: number; text: string } | 'refused'> {
  try {
    const res = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000, reset: true });
    return { status: res.statusCode, text: await res.body.text() };
  } catch (err) {
    if ((err as { code?: string }).code === 'ECONNREFUSED') return 'refused';
    throw err;
  }
}

/** What a readiness rule for each kind would see. */
const observe: Record<'vllm' | 'sglang' | 'tgi', (base: string) => Promise<Observation | Between>> = {
  async vllm(base) {
    const health = await get(`${base}/health`);
    if (health === 'refused') return 'refused';
    const models = await get(`${base}/v1/models`);
    if (models === 'refused') return 'unexpected';
    if (health.status === 200 && models.status === 503) return 'loading';
    if (health.status === 200 && models.status === 200 && JSON.parse(models.text).data[0].id === 'phase-model') return 'ready';
    return 'unexpected';
  },
  async sglang(base) {
    const health = await get(`${base}/health`);
    if (health === 'refused') return 'refused';
    const info = await get(`${base}/get_model_info`);
    if (info === 'refused') return 'unexpected';
    if (health.status === 503 && info.status === 503) return 'loading';
    if (health.status === 200 && info.status === 200 && JSON.parse(info.text).model_path === 'phase-model') return 'ready';
    // Loading ended after /health answered and before /get_model_info did. The other order
    // (ready, then loading) would be a phase going backwards, and stays 'unexpected'.
    if (health.status === 503 && info.status === 200) return 'between';
    return 'unexpected';
  },
  async tgi(base) {
    const health = await get(`${base}/health`);
    if (health === 'refused') return 'refused';
    if (health.status === 503 && health.text === '{"error":"unhealthy","error_type":"healthcheck"}') return 'loading';
    const info = await get(`${base}/info`);
    if (info === 'refused') return 'unexpected';
    if (health.status === 200 && info.status === 200 && JSON.parse(info.text).model_id === 'phase-model') return 'ready';
    return 'unexpected';
  },
};

describe('load phases are observed in order: connection refused -> loading -> ready', { concurrency: true }, () => {
  for (const kind of ['vllm', 'sglang', 'tgi'] as const) {
    test(kind, async () => {
      const port = await freePort();
      const sim = startCli([
        'sim',
        '--port',
        String(port),
        '--engine-kind',
        kind,
        '--model',
        'phase-model',
        '--startup-refuse-seconds',
        '1',
        '--startup-loading-seconds',
        '2',
      ]);
      const base = `http://127.0.0.1:${port}`;
      // looks every 50 ms until ready, noting each phase seen
      const seen: Observation[] = [];
      await until('ready', async () => {
        const now = await observe[kind](base);
        if (now === 'between') return false;
        if (seen[seen.length - 1] !== now) seen.push(now);
        return now === 'ready';
      }).catch((err: Error) => assert.fail(`${err.message}; phases seen: ${seen.join(' -> ')}`));
      assert.deepEqual(seen, ['refused', 'loading', 'ready']);
      assert.equal(sim.output(), `sim listening on http://127.0.0.1:${port}\n`);
      assert.equal(await sim.stop('SIGTERM'), 0);
    });
  }
});

test('a vLLM engine answers inference with 503 while loading', async () => {
  const sim = await startSim(['--startup-loading-seconds', '30']);
  const res = await request(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'sim-model', messages: [] }),
  });
  assert.equal(res.statusCode, 503);
  assert.equal(((await res.body.json()) as { error: { code: number } }).error.code, 503);
  assert.equal(await sim.stop('SIGINT'), 0);
});

test('--help lists the flags; a bad flag exits 2 with a reason', async () => {
  const help = startCli(['sim', '--help']);
  assert.equal(await new Promise((resolve) => help.child.once('exit', resolve)), 0);
  for (const flag of [
    '--host',
    '--port',
    '--model',
    '--engine-kind',
    '--startup-refuse-seconds',
    '--startup-loading-seconds',
    '--ttft-ms',
    '--itl-ms',
    '--output-tokens',
    '--max-num-seqs',
    '--embedding-dim',
    '--id',
    '--fault',
  ]) {
    assert.match(help.output(), new RegExp(`^  ${flag}\\b`, 'm'), flag);
  }
  const bad = startCli(['sim', '--engine-kind', 'llamacpp']);
  assert.equal(await new Promise((resolve) => bad.child.once('exit', resolve)), 2);
  assert.match(bad.output(), /--engine-kind: must be one of vllm, sglang, tgi, openai/);
});

test('SIGTERM exits 0 even with a request hanging and a stream open', async () => {
  const sim = await startSim(['--fault', 'hang', '--id', 'hung']);
  const hanging = request(`${sim.url}/v1/completions`, { method: 'POST', body: '{"prompt":"x"}' }).catch((err: Error) => err);
  await until('the request at the engine', async () => (await simStats(sim.url)).received === 1, 5_000);
  assert.equal(await sim.stop('SIGTERM'), 0);
  assert.ok((await hanging) instanceof Error);
});
