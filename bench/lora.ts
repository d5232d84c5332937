// LoRA adapters: how often a request waits for an adapter load, and how much loading and unloading the engines do
// (`npm run bench -- --only lora`). 50 adapters over 4 simulated engines with 4 adapter slots each; a skewed request mix
// (Zipf, s = 1, fixed seed), the same sequence for both policies:
// - the router: routes each adapter to the engines that hold it and loads it on demand (src/router/adapters);
// - a policy that ignores adapters: requests go round robin over the engines, and each engine loads the adapter a
//   request names when it does not hold it, unloading its least recently used idle adapter when its slots are full
//   (what engines that load adapters themselves behind an adapter-blind balancer do). The bench plays that policy itself,
//   against the same simulators.
// Churn is counted by the engines: adapters loaded plus unloaded, per 1,000 requests.
import path from 'node:path';
import { Agent, request } from 'undici';
import { startSimEngine, type SimEngine } from '../src/tools/sim/engine.js';
import { VLLM_LORA } from '../src/tools/sim/lora.js';
import { fetchOnce, freePort, startServe, waitUntil } from './procs.js';
import type { Row } from './report.js';
import { mulberry32 } from './routing-quality.js';

const BASE = 'lora-base';
const ENGINES = 4;
const SLOTS = 4;
const ADAPTERS = 50;
const ZIPF_S = 1;
const SEED = 42;
const LOAD_DELAY_MS = 20;

export interface LoraPolicyResult {
  readonly requests: number;
  /** share of requests that waited for a load of their adapter */
  readonly waitedShare: number;
  readonly loads: number;
  readonly unloads: number;
  /** (loads + unloads) per 1,000 requests */
  readonly churnPer1000: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
}

export interface LoraBenchResult {
  readonly adapters: number;
  readonly engines: number;
  readonly slots: number;
  readonly concurrency: number;
  readonly router: LoraPolicyResult;
  readonly ignoring: LoraPolicyResult;
}

const name = (i: number): string => `lora-${String(i).padStart(2, '0')}`;

/** `n` adapter indexes drawn from Zipf(s) over ADAPTERS, from a fixed seed. */
export function zipfMix(n: number, seed = SEED): number[] {
  const weights = Array.from({ length: ADAPTERS }, (_, k) => 1 / (k + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  const cdf: number[] = [];
  let sum = 0;
  for (const w of weights) {
    sum += w / total;
    cdf.push(sum);
  }
  const rnd = mulberry32(seed);
  return Array.from({ length: n }, () => {
    const u = rnd();
    const i = cdf.findIndex((c) => u <= c);
    return i < 0 ? ADAPTERS - 1 : i;
  });
}

function startEngines(): Promise<SimEngine[]> {
  return Promise.all(
    Array.from({ length: ENGINES }, (_, i) =>
      startSimEngine({
        models: [BASE],
        id: `lora-engine-${i}`,
        ttftMs: 5,
        itlMs: 2,
        outputTokens: 4,
        lora: { maxLoras: SLOTS, loadDelayMs: LOAD_DELAY_MS },
      }),
    ),
  );
}

/** the clients' connections, kept alive within one run (runLora closes it) */
let agent = new Agent({ connections: 64, keepAliveTimeout: 10_000 });

async function post(url: string, pathname: string, body: object): Promise<number> {
  const res = await request(url + pathname, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher: agent,
  });
  await res.body.dump();
  return res.statusCode;
}

const chat = (adapter: number): object => ({ model: name(adapter), messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });

/** Runs `mix` with `concurrency` clients through `send` (which says whether the request waited for a load). */
async function replay(
  mix: readonly number[],
  concurrency: number,
  send: (adapter: number) => Promise<boolean>,
): Promise<{ waited: number; ms: number[] }> {
  let next = 0;
  let waited = 0;
  const ms: number[] = [];
  const client = async (): Promise<void> => {
    while (next < mix.length) {
      const adapter = mix[next++] as number;
      const t0 = performance.now();
      if (await send(adapter)) waited++;
      ms.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  return { waited, ms: ms.sort((a, b) => a - b) };
}

function summary(engines: readonly SimEngine[], requests: number, waited: number, ms: readonly number[]): LoraPolicyResult {
  let loads = 0;
  let unloads = 0;
  for (const e of engines) {
    const lora = e.stats().lora;
    loads += lora?.loads ?? 0;
    unloads += lora?.unloads ?? 0;
  }
  const at = (p: number): number => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))] ?? Number.NaN;
  return {
    requests,
    waitedShare: waited / requests,
    loads,
    unloads,
    churnPer1000: ((loads + unloads) * 1000) / requests,
    p50Ms: at(0.5),
    p90Ms: at(0.9),
  };
}

/** The router in front of the engines, every adapter declared; waits are counted by its own metric. */
async function throughRouter(cli: string, dir: string, mix: readonly number[], concurrency: number): Promise<LoraPolicyResult> {
  const engines = await startEngines();
  const port = await freePort();
  const adapters = Array.from({ length: ADAPTERS }, (_, i) => `${name(i)}@${BASE}=/adapters/${name(i)}`).join(',');
  const router = startServe(cli, dir, 'router-lora', port, [
    '--static-backends',
    engines.map((e) => e.url).join(','),
    '--static-models',
    engines.map(() => BASE).join(','),
    '--lora-adapters',
    adapters,
  ]);
  try {
    // every engine ready and its slots scraped (max_lora), so the router knows it may hold 4 adapters
    await waitUntil(
      'router-lora',
      async () => {
        const engines = JSON.parse((await fetchOnce(port, 'GET', '/engines')).text) as {
          endpoints: { state: string; adapterSlots: number }[];
        };
        return engines.endpoints.length === ENGINES && engines.endpoints.every((e) => e.state === 'ready' && e.adapterSlots === SLOTS);
      },
      { proc: router },
    );
    const url = `http://127.0.0.1:${port}`;
    const { ms } = await replay(mix, concurrency, async (adapter) => {
      const status = await post(url, '/v1/chat/completions', chat(adapter));
      if (status !== 200) throw new Error(`router answered ${status} for ${name(adapter)}`);
      return false;
    });
    const metrics = (await fetchOnce(port, 'GET', '/metrics')).text;
    let waited = 0;
    for (const m of metrics.matchAll(/^llm_router_adapter_requests_total\{adapter="[^"]+",waited="true"\} (\d+)$/gm))
      waited += Number(m[1]);
    return summary(engines, mix.length, waited, ms);
  } finally {
    await router.stop();
    await Promise.all(engines.map((e) => e.close()));
  }
}

/** What an engine holds, for the policy that ignores adapters: loads under way, requests per adapter, last use. */
interface EngineSlots {
  readonly loaded: Map<number, { inFlight: number; lastUsed: number }>;
  readonly loading: Map<number, Promise<void>>;
}

/** Round robin over the engines whatever the adapter; the engine a request lands on loads the adapter if it must. */
async function ignoringAdapters(mix: readonly number[], concurrency: number): Promise<LoraPolicyResult> {
  const engines = await startEngines();
  const slots: EngineSlots[] = engines.map(() => ({ loaded: new Map(), loading: new Map() }));
  let turn = 0;
  /** one load of an adapter per engine at a time; a full engine unloads its least recently used idle adapter first */
  const load = (i: number, adapter: number): Promise<void> => {
    const s = slots[i] as EngineSlots;
    const url = (engines[i] as SimEngine).url;
    let loading = s.loading.get(adapter);
    if (!loading) {
      loading = (async () => {
        if (s.loaded.size + s.loading.size >= SLOTS) {
          const idle = [...s.loaded].filter(([, u]) => u.inFlight === 0).sort((a, b) => a[1].lastUsed - b[1].lastUsed)[0];
          if (idle) {
            s.loaded.delete(idle[0]);
            await post(url, VLLM_LORA.unloadPath, { lora_name: name(idle[0]) });
          }
        }
        const status = await post(url, VLLM_LORA.loadPath, { lora_name: name(adapter), lora_path: `/adapters/${name(adapter)}` });
        if (status !== 200 && status !== 400) throw new Error(`load answered ${status}`);
        s.loaded.set(adapter, { inFlight: 0, lastUsed: performance.now() });
      })().finally(() => s.loading.delete(adapter));
      s.loading.set(adapter, loading);
    }
    return loading;
  };
  try {
    const { waited, ms } = await replay(mix, concurrency, async (adapter) => {
      const i = turn++ % ENGINES;
      const s = slots[i] as EngineSlots;
      let waitedForLoad = false;
      // taken in the same turn as the check: an adapter in use is never the one unloaded
      for (;;) {
        const use = s.loaded.get(adapter);
        if (use) {
          use.inFlight++;
          break;
        }
        waitedForLoad = true;
        await load(i, adapter);
      }
      const use = s.loaded.get(adapter) as { inFlight: number; lastUsed: number };
      try {
        const status = await post((engines[i] as SimEngine).url, '/v1/chat/completions', chat(adapter));
        if (status !== 200) throw new Error(`engine answered ${status} for ${name(adapter)}`);
      } finally {
        use.inFlight--;
        use.lastUsed = performance.now();
      }
      return waitedForLoad;
    });
    return summary(engines, mix.length, waited, ms);
  } finally {
    await Promise.all(engines.map((e) => e.close()));
  }
}

export async function runLora(opts: { cli: string; dir: string; quick: boolean }, log: (line: string) => void): Promise<LoraBenchResult> {
  const concurrency = 16;
  const mix = zipfMix(opts.quick ? 1_000 : 3_000);
  agent = new Agent({ connections: 64, keepAliveTimeout: 10_000 });
  try {
    const router = await throughRouter(opts.cli, opts.dir, mix, concurrency);
    log(`lora router: waited ${(router.waitedShare * 100).toFixed(1)} %, churn ${router.churnPer1000.toFixed(1)} per 1,000 requests`);
    const ignoring = await ignoringAdapters(mix, concurrency);
    log(
      `lora ignoring adapters: waited ${(ignoring.waitedShare * 100).toFixed(1)} %, churn ${ignoring.churnPer1000.toFixed(1)} per 1,000 requests`,
    );
    return { adapters: ADAPTERS, engines: ENGINES, slots: SLOTS, concurrency, router, ignoring };
  } finally {
    await agent.close();
  }
}

/** The benchmark table's LoRA rows: the router, and the policy that ignores adapters in the `direct` column. */
export function loraRows(r: LoraBenchResult): Row[] {
  const scenario = `LoRA: ${r.adapters} adapters, ${r.engines} engines x ${r.slots} slots, Zipf mix, ${r.router.requests} requests at ${r.concurrency} (direct: a policy that ignores adapters)`;
  return [
    {
      scenario,
      metric: 'requests that waited for a load, %',
      direct: r.ignoring.waitedShare * 100,
      router: r.router.waitedShare * 100,
      digits: 1,
    },
    { scenario, metric: 'loads + unloads per 1,000 requests', direct: r.ignoring.churnPer1000, router: r.router.churnPer1000, digits: 1 },
    { scenario, metric: 'request p50 ms', direct: r.ignoring.p50Ms, router: r.router.p50Ms, digits: 1 },
    { scenario, metric: 'request p90 ms', direct: r.ignoring.p90Ms, router: r.router.p90Ms, digits: 1 },
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { mkdtempSync } = await import('node:fs');
  const os = await import('node:os');
  const cli = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'dist', 'cli', 'main.js');
  const r = await runLora({ cli, dir: mkdtempSync(path.join(os.tmpdir(), 'lora-bench-')), quick: process.argv.includes('--quick') }, (l) =>
    process.stderr.write(`[lora] ${l}\n`),
  );
  process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
  process.exit(0);
}
