// An offline model of bench/kv.ts's replay part: no processes, no HTTP, simulated time. A trace goes through the REAL
// routing policies (createPolicy: kvaware over prefixaware, prefixaware, roundrobin, least-load) in front of four
// model engines, each with the simulator's own prefix cache (src/tools/sim/prefix-cache.ts, reused, not copied) of
// the bench's size, its 16-slot FIFO batch, and its timing (TTFT = base + per uncached prompt token, computed one
// prefill at a time per engine unless --parallel-prefill, then one output token per ITL). kvaware reads an exact index
// of the engines' caches fed as their KV events would feed it: a request's stores and evictions become visible
// `eventLagMs` after its prefill starts (the simulator publishes when its slot is granted), or at its prefill's end
// (`--events end`, as a real engine announces computed blocks); its dispatches are followed as the forwarders follow
// them (RoutingPolicy.dispatched: the first byte at the prefill's end). Each router replica has its own endpoints (own
// in-flight counts, engine load scraped every second) and its own policy instance; requests alternate between
// replicas, as in the bench. Closed-loop clients (--clients N) or open loop at --rate with --concurrency in flight.
//
// Besides the hit rate it attributes the tokens lost against one combined cache (run alongside, same order) to the
// decision that lost them: the reason kvaware routed by (match, no-match, overloaded, too-short) and whether a longer
// prefix was held on another engine at that moment.
//
//   node --import tsx bench/kv-model.ts [--trace FILE] [--requests N] [--system-prompts N] [--policies a,b]
//        [--replicas 1,2] [--clients N] [--events start|end] [--event-lag-ms L] [--rate R] [--max-num-seqs N]
//        [--parallel-prefill] [--set copyWeight=3,sharedWeight=0.1,...] [--json]
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { BlockKey } from '../src/router/kv/block-key.js';
import type { KvDecisionObserver, KvFallbackReason, KvIndexView, KvMatch } from '../src/router/kv/types.js';
import { createPolicy } from '../src/router/routing/index.js';
import { KvAwarePolicy, type KvAwareOptions } from '../src/router/routing/kv-aware.js';
import type { Dispatch, RouteRequest, RoutingPolicy } from '../src/router/routing/policy.js';
import type { RoutingLogic } from '../src/router/config/config.js';
import { PrefixCache } from '../src/tools/sim/prefix-cache.js';
import { rng } from '../test/support/conversations.js';
import { testEndpoint, type WritableEndpoint } from '../test/support/endpoints.js';
import {
  BlockLru,
  cacheFigures,
  generateTrace,
  parseTrace,
  promptText,
  rowBlocks,
  TRACE_BLOCK_TOKENS,
  type Scale,
  type TraceRow,
} from './kv-trace.js';

const ENGINES = 4;
const MODEL = 'bench-kv';

export interface ModelOptions {
  readonly rows: readonly TraceRow[];
  readonly scale: Scale;
  readonly cacheShare: number;
  readonly rate: number;
  readonly concurrency: number;
  readonly replicas: number;
  readonly policy: string;
  /** when an engine's stores and evictions reach the router: at its prefill's start (+ lag, as the simulator), or end */
  readonly events: 'start' | 'end';
  readonly eventLagMs: number;
  readonly ttftMs: number;
  readonly prefillMsPerToken: number;
  readonly itlMs: number;
  readonly maxNumSeqs: number;
  readonly statsIntervalMs: number;
  /** closed loop: this many clients sending back to back (arrival times ignored); 0 = open loop at `rate` */
  readonly clients?: number;
  /** prefills run one at a time per engine, as on one GPU (the simulator's --prefill-stalls-decode) */
  readonly serialPrefill?: boolean;
  /** kvaware's tuning knobs, passed to the policy as they are (see KvAwareOptions) */
  readonly kv: Readonly<Record<string, number | boolean>>;
}

export interface LossRow {
  requests: number;
  /** prompt tokens of those requests */
  tokens: number;
  hitTokens: number;
  combinedHitTokens: number;
  /** tokens a longer prefix held elsewhere at decision time would have saved */
  missedElsewhere: number;
  /** tokens the combined cache hit beyond the longest prefix any engine held at decision time (capacity, copies) */
  heldNowhere: number;
}

export interface ModelResult {
  readonly policy: string;
  readonly replicas: number;
  readonly hitRate: number;
  readonly combinedHitRate: number;
  readonly maxEngineShare: number;
  readonly ttftP50Ms: number;
  readonly ttftP90Ms: number;
  /** by decision kind: requests, tokens, hits, what the combined cache hit on them */
  readonly byReason: Record<string, LossRow>;
  /** requests served per engine */
  readonly perEngine: number[];
}

// ---- a binary heap of timed events ----

interface Timed {
  readonly at: number;
  readonly seq: number;
  readonly run: () => void | Promise<void>;
}

class Heap {
  private readonly a: Timed[] = [];
  private seq = 0;
  get size(): number {
    return this.a.length;
  }
  push(at: number, run: () => void | Promise<void>): void {
    const a = this.a;
    a.push({ at, seq: this.seq++, run });
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(a[i] as Timed, a[p] as Timed)) break;
      [a[i], a[p]] = [a[p] as Timed, a[i] as Timed];
      i = p;
    }
  }
  pop(): Timed | undefined {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && less(a[l] as Timed, a[m] as Timed)) m = l;
        if (r < a.length && less(a[r] as Timed, a[m] as Timed)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m] as Timed, a[i] as Timed];
        i = m;
      }
    }
    return top;
  }
}

function less(x: Timed, y: Timed): boolean {
  return x.at < y.at || (x.at === y.at && x.seq < y.seq);
}

// ---- the index as the events build it ----

/** What each engine's events have told the router so far: its blocks, exactly (GPU only). */
class EventIndex implements KvIndexView {
  readonly held: Set<BlockKey>[];
  constructor(
    private readonly ids: readonly string[],
    private readonly blockTokens: number,
  ) {
    this.held = ids.map(() => new Set<BlockKey>());
  }
  apply(engine: number, stored: readonly BlockKey[], evicted: readonly BlockKey[]): void {
    const s = this.held[engine] as Set<BlockKey>;
    for (const k of evicted) s.delete(k);
    for (const k of stored) s.add(k);
  }
  leading(engine: number, keys: readonly BlockKey[]): number {
    const s = this.held[engine] as Set<BlockKey>;
    let n = 0;
    while (n < keys.length && s.has(keys[n] as BlockKey)) n++;
    return n;
  }
  match(keys: readonly BlockKey[], endpointIds: readonly string[]): ReadonlyMap<string, KvMatch> {
    const out = new Map<string, KvMatch>();
    for (const id of endpointIds) {
      const i = this.ids.indexOf(id);
      if (i < 0) continue;
      const n = this.leading(i, keys);
      if (n > 0) out.set(id, { gpu: n, total: n });
    }
    return out;
  }
  blockSize(): number {
    return this.blockTokens;
  }
}

// ---- the replay ----

interface Job {
  readonly i: number;
  readonly row: TraceRow;
  readonly keys: readonly BlockKey[];
  readonly tokens: number;
  readonly outTokens: number;
  readonly arrival: number;
  /** when the client sent it (after waiting for one of its `concurrency` connections) */
  sent: number;
  readonly request: RouteRequest;
  reason: string;
  engine: number;
  replica: number;
  /** longest prefix any engine's index showed at decision time, and whether it was the chosen one */
  bestElsewhere: number;
  chosenHeld: number;
  /** the policy's handle on the call (kvaware follows its prefill) */
  dispatch: Dispatch | undefined;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export async function runModel(o: ModelOptions): Promise<ModelResult> {
  const figures = cacheFigures(o.rows, o.scale);
  const perEngine = Math.max(1, Math.round(figures.distinctBlocks * o.cacheShare));
  const engineIds = Array.from({ length: ENGINES }, (_, i) => `engine-${i}`);
  const caches = engineIds.map(() => new PrefixCache<BlockKey>(perEngine));
  const index = new EventIndex(engineIds, o.scale.kvBlockSize);
  let now = 0;
  const clock = (): number => now;
  // per replica: its own endpoints (in-flight counts, scraped load) and its own policy instance
  const jobsByRequest = new WeakMap<RouteRequest, Job>();
  const replicas = Array.from({ length: o.replicas }, () => {
    const endpoints: WritableEndpoint[] = engineIds.map((id, i) => testEndpoint(`http://127.0.0.1:${9000 + i}`, { id, models: [MODEL] }));
    const observer: KvDecisionObserver = {
      matched: () => undefined,
      fallback: () => undefined,
    };
    let current: Job | undefined;
    const recording: KvDecisionObserver = {
      matched: (m, matched, blocks) => {
        if (current) current.reason = 'match';
        observer.matched(m, matched, blocks);
      },
      fallback: (m, reason: KvFallbackReason) => {
        if (current) current.reason = reason;
        observer.fallback(m, reason);
      },
    };
    const common = { engineStatsIntervalMs: o.statsIntervalMs, now: clock, random: rng(7) };
    // kvaware built as createPolicy builds it (over prefixaware over least-load), with the model's knobs on top
    const policy: RoutingPolicy =
      o.policy === 'kvaware'
        ? new KvAwarePolicy(
            {
              index,
              keys: {
                keys: async (r) => {
                  const job = jobsByRequest.get(r as RouteRequest);
                  if (job === undefined) return 'no-prompt';
                  return { tokens: job.tokens, keysAt: () => job.keys };
                },
                blockSizeOf: () => o.scale.kvBlockSize,
              },
              observer: recording,
              engineStatsIntervalMs: o.statsIntervalMs,
              now: clock,
              ...(o.kv as Partial<KvAwareOptions>),
            },
            createPolicy('prefixaware', common),
          )
        : createPolicy(o.policy as RoutingLogic, common);
    return {
      endpoints,
      policy,
      setCurrent: (j: Job | undefined) => {
        current = j;
      },
    };
  });

  const heap = new Heap();
  // engines: 16 slots, FIFO queue
  const running = engineIds.map(() => 0);
  /** per engine: when its prefills reserved so far end (serial prefill) */
  const lanes = engineIds.map(() => 0);
  const queues: Job[][] = engineIds.map(() => []);
  const served = engineIds.map(() => 0);
  let clientInFlight = 0;
  const clientWaiting: Job[] = [];
  const ttfts: number[] = [];
  const combined = new BlockLru(perEngine * ENGINES);
  const byReason: Record<string, LossRow> = {};
  let queries = 0;
  let hits = 0;
  let combinedHits = 0;

  const closedLoop = (o.clients ?? 0) > 0;
  const pendingRows: Job[] = [];
  const span = Math.max(1, (o.rows[o.rows.length - 1]?.timestamp ?? 0) - (o.rows[0]?.timestamp ?? 0));
  const compress = Math.max(1, span / 1000 / (o.rows.length / o.rate));
  const base = o.rows[0]?.timestamp ?? 0;

  const start = (job: Job): void => {
    const e = job.engine;
    running[e] = (running[e] as number) + 1;
    const cache = caches[e] as PrefixCache<BlockKey>;
    const keys = job.keys;
    const { hits: found, stored, evicted } = cache.admit(keys, (i) => keys[i] as BlockKey);
    const hit = Math.min(found * o.scale.kvBlockSize, Math.max(0, job.tokens - 1));
    const cHit = Math.min(combined.admit(keys) * o.scale.kvBlockSize, Math.max(0, job.tokens - 1));
    queries += job.tokens;
    hits += hit;
    combinedHits += cHit;
    const row = byReason[job.reason] ?? { requests: 0, tokens: 0, hitTokens: 0, combinedHitTokens: 0, missedElsewhere: 0, heldNowhere: 0 };
    byReason[job.reason] = row;
    row.requests++;
    row.tokens += job.tokens;
    row.hitTokens += hit;
    row.combinedHitTokens += cHit;
    row.missedElsewhere += Math.max(0, job.bestElsewhere - job.chosenHeld) * o.scale.kvBlockSize;
    row.heldNowhere += Math.max(0, cHit - Math.max(hit, job.bestElsewhere * o.scale.kvBlockSize));
    let ttft = o.ttftMs + (job.tokens - hit) * o.prefillMsPerToken;
    if (o.serialPrefill) {
      // one prefill at a time on this engine: it waits for those before it
      const begin = Math.max(now, lanes[e] as number);
      lanes[e] = begin + (job.tokens - hit) * o.prefillMsPerToken;
      ttft = o.ttftMs + (lanes[e] as number) - now;
    }
    ttfts.push(now - job.sent + ttft);
    heap.push(now + ttft, () => job.dispatch?.firstByte());
    const published = o.events === 'start' ? now + o.eventLagMs : now + ttft + o.eventLagMs;
    const st = [...stored];
    const ev = [...evicted];
    heap.push(published, () => index.apply(e, st, ev));
    heap.push(now + ttft + o.itlMs * Math.max(0, job.outTokens - 1), () => finish(job));
  };

  const finish = (job: Job): void => {
    const e = job.engine;
    running[e] = (running[e] as number) - 1;
    served[e] = (served[e] as number) + 1;
    const ep = replicas[job.replica]?.endpoints[e] as WritableEndpoint;
    ep.inFlight--;
    job.dispatch?.ended();
    const next = (queues[e] as Job[]).shift();
    if (next) start(next);
    clientInFlight--;
    if (closedLoop) {
      const row = pendingRows.shift();
      if (row) void dispatch(row);
      return;
    }
    const waiting = clientWaiting.shift();
    if (waiting) void dispatch(waiting);
  };

  const dispatch = async (job: Job): Promise<void> => {
    clientInFlight++;
    job.sent = now;
    const r = replicas[job.replica] as (typeof replicas)[number];
    await r.policy.prepare?.(r.endpoints, job.request);
    r.setCurrent(job);
    job.reason = o.policy;
    // what the index shows at this moment, for the loss attribution
    let best = 0;
    for (let e = 0; e < ENGINES; e++) best = Math.max(best, index.leading(e, job.keys));
    const chosen = r.policy.pick(r.endpoints, job.request);
    r.setCurrent(undefined);
    if (chosen === undefined) throw new Error('no endpoint picked');
    const e = engineIds.indexOf(chosen.id);
    job.engine = e;
    job.bestElsewhere = best;
    job.chosenHeld = index.leading(e, job.keys);
    (r.endpoints[e] as WritableEndpoint).inFlight++;
    job.dispatch = r.policy.dispatched?.(chosen, job.request);
    if ((running[e] as number) < o.maxNumSeqs && (queues[e] as Job[]).length === 0) start(job);
    else (queues[e] as Job[]).push(job);
  };

  // engine stats scrapes: what each replica's /metrics scrape would show
  const scrape = (): void => {
    for (const r of replicas) {
      for (let e = 0; e < ENGINES; e++) {
        const ep = r.endpoints[e] as WritableEndpoint;
        const waiting = (queues[e] as Job[]).length;
        const run = running[e] as number;
        ep.engineLoad = {
          at: now,
          running: run,
          waiting,
          kvUsage: undefined,
          otherLoad: Math.max(0, run + waiting - ep.inFlight) + waiting,
          others: Math.max(0, run + waiting - ep.inFlight),
          ours: ep.inFlight,
        };
      }
    }
  };

  for (const [i, row] of o.rows.entries()) {
    const blocks = rowBlocks(row, o.scale);
    const head: TraceRow =
      row.hash_ids.length > 12 ? { ...row, hash_ids: row.hash_ids.slice(0, 12), input_length: 12 * TRACE_BLOCK_TOKENS } : row;
    const request: RouteRequest = { model: MODEL, headers: {}, body: { model: MODEL, prompt: promptText(head, o.scale.blockTokens) } };
    const job: Job = {
      i,
      row,
      keys: blocks.keys,
      tokens: blocks.tokens,
      outTokens: Math.max(1, Math.min(64, Math.round((row.output_length * o.scale.blockTokens) / TRACE_BLOCK_TOKENS))),
      arrival: (row.timestamp - base) / compress,
      sent: 0,
      request,
      reason: '',
      engine: -1,
      replica: i % o.replicas,
      bestElsewhere: 0,
      chosenHeld: 0,
      dispatch: undefined,
    };
    jobsByRequest.set(request, job);
    if (closedLoop) pendingRows.push(job);
    else
      heap.push(job.arrival, async () => {
        if (clientInFlight >= o.concurrency) clientWaiting.push(job);
        else await dispatch(job);
      });
  }
  // closed loop: each client sends the next request as its last one ends
  if (closedLoop)
    for (let c = 0; c < (o.clients as number); c++)
      heap.push(0, async () => {
        const job = pendingRows.shift();
        if (job) await dispatch(job);
      });
  // engine stats scrapes every interval while requests are left
  const scrapes = (): void => {
    scrape();
    if (served.reduce((a, b) => a + b, 0) < o.rows.length) heap.push(now + o.statsIntervalMs, scrapes);
  };
  heap.push(0, scrapes);
  for (;;) {
    const ev = heap.pop();
    if (!ev) break;
    now = ev.at;
    await ev.run();
    if (served.reduce((a, b) => a + b, 0) === o.rows.length) break;
  }
  ttfts.sort((a, b) => a - b);
  const total = served.reduce((a, b) => a + b, 0);
  return {
    policy: o.policy,
    replicas: o.replicas,
    hitRate: queries > 0 ? hits / queries : 0,
    combinedHitRate: queries > 0 ? combinedHits / queries : 0,
    maxEngineShare: Math.max(...served) / Math.max(1, total),
    ttftP50Ms: percentile(ttfts, 50),
    ttftP90Ms: percentile(ttfts, 90),
    byReason,
    perEngine: served,
  };
}

// ---- command line ----

function arg(argv: readonly string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

export function renderModel(results: readonly ModelResult[]): string {
  const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
  const lines: string[] = [];
  for (const r of results) {
    const rr = results.find((x) => x.policy === 'roundrobin' && x.replicas === r.replicas);
    lines.push(
      `${r.policy} x${r.replicas}: hit ${pct(r.hitRate)} = ${(r.hitRate / r.combinedHitRate).toFixed(3)} x combined (${pct(r.combinedHitRate)})` +
        `${rr ? `, ${(r.hitRate / rr.hitRate).toFixed(2)} x RR` : ''}, busiest ${pct(r.maxEngineShare)}, least ${pct(
          Math.min(...r.perEngine) /
            Math.max(
              1,
              r.perEngine.reduce((a, b) => a + b, 0),
            ),
        )}, TTFT p50 ${r.ttftP50Ms.toFixed(0)} p90 ${r.ttftP90Ms.toFixed(0)} ms`,
    );
    if (r.policy === 'kvaware') {
      for (const [reason, x] of Object.entries(r.byReason)) {
        lines.push(
          `   ${reason.padEnd(12)} ${String(x.requests).padStart(5)} req, hit ${String(x.hitTokens).padStart(8)} vs combined ${String(x.combinedHitTokens).padStart(8)}` +
            ` (lost ${String(x.combinedHitTokens - x.hitTokens).padStart(7)}), longer prefix elsewhere ${x.missedElsewhere}, held nowhere ${x.heldNowhere}`,
        );
      }
    }
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const trace = arg(argv, 'trace');
  const requests = Number(arg(argv, 'requests') ?? 1500);
  const systems = arg(argv, 'system-prompts');
  const rows = trace
    ? parseTrace(readFileSync(trace, 'utf8')).slice(0, requests)
    : generateTrace({
        requests,
        seed: Number(arg(argv, 'seed') ?? 42),
        ...(systems !== undefined ? { systemPrompts: Number(systems) } : {}),
      });
  const kv: Record<string, number | boolean> = {};
  for (const kvp of (arg(argv, 'set') ?? '').split(',').filter(Boolean)) {
    const [k, v] = kvp.split('=');
    if (k === undefined || v === undefined) throw new Error(`--set ${kvp}: key=value`);
    kv[k] = v === 'true' ? true : v === 'false' ? false : Number(v);
  }
  const results: ModelResult[] = [];
  for (const replicas of (arg(argv, 'replicas') ?? '1,2').split(',').map(Number)) {
    for (const policy of (arg(argv, 'policies') ?? 'roundrobin,prefixaware,kvaware').split(',')) {
      results.push(
        await runModel({
          rows,
          scale: { blockTokens: Number(arg(argv, 'block-scale') ?? 32), kvBlockSize: Number(arg(argv, 'kv-block-size') ?? 16) },
          cacheShare: Number(arg(argv, 'cache-share') ?? 0.1),
          rate: Number(arg(argv, 'rate') ?? 30),
          concurrency: Number(arg(argv, 'concurrency') ?? 32),
          replicas,
          policy,
          events: arg(argv, 'events') === 'end' ? 'end' : 'start',
          eventLagMs: Number(arg(argv, 'event-lag-ms') ?? 2),
          ttftMs: Number(arg(argv, 'ttft-ms') ?? 5),
          prefillMsPerToken: Number(arg(argv, 'prefill-ms-per-token') ?? 0.25),
          itlMs: Number(arg(argv, 'itl-ms') ?? 1),
          maxNumSeqs: Number(arg(argv, 'max-num-seqs') ?? 16),
          statsIntervalMs: 1000,
          clients: Number(arg(argv, 'clients') ?? 0),
          serialPrefill: !argv.includes('--parallel-prefill'),
          kv,
        }),
      );
    }
  }
  if (argv.includes('--json')) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  else process.stdout.write(`${renderModel(results)}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
