// LoRA adapters on demand: before a request for an adapter is forwarded, make sure a ready endpoint of its base holds
// it, loading it (once, however many requests wait for it) where placement.ts says, and unloading the least recently
// used idle adapter this router loaded when that endpoint's slots are full. Engines that hold it are learned from their
// /v1/models (the prober) and from the loads made here; the catalog, not this module, answers whether an adapter exists.
import { isRoutable, type ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint } from '../core/endpoint.js';
import { VLLM_MISSING, type AdapterLedger, type AdapterObserver, type MissingAdapterAnswer } from '../core/lora.js';
import type { AdapterRoute } from '../core/model.js';
import { allowsDecodeOnly, type PdProtocol } from '../core/pd.js';
import type { TraceSpan } from '../core/trace.js';
import type { Logger } from '../util/log.js';
import type { AdapterAdmin } from './engine-admin.js';
import { chooseLoader, chooseVictim, freeSlots, loadOf, shouldSpill, type AdapterUse, type LoaderFacts } from './placement.js';

export interface AdapterManagerOptions {
  /** slots of an engine whose /metrics reports none (--max-loras-per-engine) */
  readonly defaultSlots: number;
  /** --lora-spill-threshold (0 = never) */
  readonly spillThreshold: number;
  /** --lora-load-cooldown-seconds, in ms */
  readonly cooldownMs: number;
  /** --engine-stats-interval in ms: how old a scraped load may be */
  readonly statsIntervalMs: number;
  readonly now?: () => number;
  /**
   * Under --workers: what the other workers of this instance use now (asked of the primary before an unload). An
   * adapter in use, or used more recently, in any of them is not this worker's to unload. It rejects when they could
   * not be asked: then nothing is unloaded.
   */
  readonly otherWorkers?: () => Promise<readonly AdapterUses[]>;
}

/** The IPC topics of adapter use under --workers: each worker's part, and every worker's (the primary gathers). */
export const ADAPTER_USE_TOPICS = { local: 'adapter-uses:local', all: 'adapter-uses:all' } as const;

/** One process's use of the adapters on each endpoint (by URL): requests in it now, and when last used. */
export interface AdapterUses {
  readonly uses: readonly { readonly endpoint: string; readonly adapter: string; readonly inFlight: number; readonly lastUsed: number }[];
}

/** The parts of the primary's answer that look like AdapterUses (anything else is left out, never trusted). */
export function parseAdapterUses(value: unknown): AdapterUses[] {
  if (typeof value !== 'object' || value === null) return [];
  const out: AdapterUses[] = [];
  for (const part of Object.values(value as Record<string, unknown>)) {
    const uses = (part as { uses?: unknown } | null)?.uses;
    if (!Array.isArray(uses)) continue;
    out.push({
      uses: uses.filter(
        (u): u is AdapterUses['uses'][number] =>
          typeof u === 'object' &&
          u !== null &&
          typeof u.endpoint === 'string' &&
          typeof u.adapter === 'string' &&
          typeof u.inFlight === 'number' &&
          typeof u.lastUsed === 'number',
      ),
    });
  }
  return out;
}

/** Whether a request for an adapter can go on, and if not, why. */
export type Prepared =
  /** a ready endpoint holds it now; `waited`: this request waited for a load */
  | { readonly kind: 'ready'; readonly waited: boolean }
  /**
   * the load failed: 502 adapter_load_failed. `detail`: the engine's words (logs, the operator's view); `status`: the
   * HTTP status it answered the load with, absent when it did not answer (all a client is told)
   */
  | { readonly kind: 'failed'; readonly detail: string; readonly status?: number }
  /** no ready endpoint of its base can load it: 503 */
  | { readonly kind: 'unavailable'; readonly detail: string };

type LoadOutcome =
  | { readonly kind: 'loaded' }
  | { readonly kind: 'unsupported'; readonly detail: string }
  | Exclude<Prepared, { kind: 'ready' }>;

/** What this process knows of one adapter on one endpoint. */
interface Use {
  inFlight: number;
  lastUsed: number;
  /** this router loaded it there, so it may unload it (never one the engine was started with) */
  routerLoaded: boolean;
}

export class AdapterManager {
  private readonly uses = new Map<Endpoint, Map<string, Use>>();
  /** one load under way per adapter and side (decode, prefill, spill): every request for it waits for that one */
  private readonly pending = new Map<string, Promise<LoadOutcome>>();
  /** loads waiting or running per endpoint: they take slots before they end */
  private readonly reserved = new Map<Endpoint, number>();
  /** loads and unloads on one endpoint run one after another, so that slots are counted right */
  private readonly chains = new Map<Endpoint, Promise<unknown>>();
  /** endpoint -> adapter -> until when it is not asked again, and why */
  private readonly failures = new Map<Endpoint, Map<string, { until: number; failed: Extract<Prepared, { kind: 'failed' }> }>>();
  private readonly ledgers = new Map<string, AdapterLedger>();
  /** endpoints asked for their slots (engines that tell them only when asked): once each */
  private readonly slotsAsked = new Set<Endpoint>();
  /** requests per adapter in this router now (waiting for a load or being answered): such an adapter is never unloaded */
  private readonly claims = new Map<string, number>();
  private readonly now: () => number;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly admin: AdapterAdmin,
    private readonly observer: AdapterObserver,
    private readonly opts: AdapterManagerOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
    this.unsubscribe = catalog.onChange((e) => {
      if (e.type === 'endpoint-removed') this.forget(e.endpoint);
      // an endpoint that went away and came back may be a new engine process: what it holds now is not ours
      else if (e.type === 'endpoint-state' && e.endpoint.state !== 'ready')
        for (const u of this.uses.get(e.endpoint)?.values() ?? []) u.routerLoaded = false;
    });
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    await this.admin.close();
  }

  /**
   * Makes sure a ready endpoint holds the adapter: when none does, it is loaded on one (the request waits, with every
   * other request for it); when every holder is loaded past --lora-spill-threshold, it is loaded on one more in the
   * background. A P/D base needs it on a prefill endpoint too (without one, protocols that can go decode-only do).
   */
  async prepare(route: AdapterRoute, pdProtocol: PdProtocol | undefined, trace?: TraceSpan): Promise<Prepared> {
    const { name } = route;
    let waited = false;
    // the route was computed when the catalog last changed: what holds it and is ready now
    const holders = route.endpoints.filter((e) => isRoutable(e) && e.adapters.has(name));
    if (holders.length === 0) {
      const loaded = await this.ensure('decode', route, route.endpoints, trace);
      if (loaded.kind !== 'loaded') return this.notLoaded(loaded, route);
      waited = true;
    } else if (route.path !== undefined && shouldSpill(holders, this.opts.spillThreshold, (e) => this.load(e))) {
      void this.ensure(
        'spill',
        route,
        route.endpoints.filter((e) => !e.adapters.has(name)),
        trace,
      );
    }
    if (pdProtocol !== undefined && route.prefill.length > 0 && !route.prefill.some((e) => isRoutable(e) && e.adapters.has(name))) {
      const loaded = await this.ensure('prefill', route, route.prefill, trace);
      if (loaded.kind === 'loaded') waited = true;
      else if (!allowsDecodeOnly(pdProtocol)) return this.notLoaded(loaded, route);
    }
    return { kind: 'ready', waited };
  }

  /** The adapter's ledger: the forwarder counts its requests per endpoint there (one object per adapter, reused). */
  ledger(name: string): AdapterLedger {
    let l = this.ledgers.get(name);
    if (!l) {
      l = {
        requestStarted: (e) => {
          const u = this.use(e, name);
          u.inFlight++;
          u.lastUsed = this.now();
        },
        requestEnded: (e) => {
          // an endpoint removed meanwhile is forgotten: nothing to count there any more
          const u = this.uses.get(e)?.get(name);
          if (!u) return;
          u.inFlight--;
          u.lastUsed = this.now();
        },
        missing: (e) => {
          this.log.info({ adapter: name, endpoint: e.url }, 'the engine says it does not hold an adapter it was thought to hold');
          this.use(e, name).routerLoaded = false;
          this.catalog.adapterGone(e, name);
        },
      };
      this.ledgers.set(name, l);
    }
    return l;
  }

  /**
   * A request for the adapter is in this router from now until the returned function is called: the adapter is not
   * idle, so no load of another adapter unloads it between its load and the request reaching the engine.
   */
  claim(name: string): () => void {
    this.claims.set(name, (this.claims.get(name) ?? 0) + 1);
    let unclaimed = false;
    return () => {
      if (unclaimed) return;
      unclaimed = true;
      const left = (this.claims.get(name) ?? 1) - 1;
      if (left > 0) this.claims.set(name, left);
      else this.claims.delete(name);
    };
  }

  /** This process's use of adapters (an adapter claimed by a request counts on every endpoint): another worker's part. */
  localUses(): AdapterUses {
    const uses: { endpoint: string; adapter: string; inFlight: number; lastUsed: number }[] = [];
    const seen = new Set<string>();
    for (const [e, byName] of this.uses) {
      for (const [adapter, u] of byName) {
        seen.add(`${e.url} ${adapter}`);
        uses.push({ endpoint: e.url, adapter, inFlight: u.inFlight + (this.claims.get(adapter) ?? 0), lastUsed: u.lastUsed });
      }
    }
    // a request waiting for a load has no endpoint yet: its adapter is in use wherever it is held
    for (const [adapter, n] of this.claims) {
      for (const e of this.catalog.endpoints()) {
        if (e.adapters.has(adapter) && !seen.has(`${e.url} ${adapter}`))
          uses.push({ endpoint: e.url, adapter, inFlight: n, lastUsed: this.now() });
      }
    }
    return { uses };
  }

  /** The `model` a request for the adapter carries to its engines: the adapter's name, or what their kind needs. */
  engineModel(route: AdapterRoute): string {
    return this.admin.requestModel?.(route.base, route.name) ?? route.name;
  }

  /** How the engines answer a request for an adapter they do not hold (the forwarder then tries another holder). */
  missingAdapter(): MissingAdapterAnswer {
    return this.admin.missingAdapter ?? VLLM_MISSING;
  }

  /** A request for the adapter goes to an engine now. */
  forwarded(name: string, waited: boolean): void {
    this.observer.request(name, waited);
  }

  private notLoaded(outcome: Exclude<LoadOutcome, { kind: 'loaded' }>, route: AdapterRoute): Prepared {
    if (outcome.kind === 'unsupported' || outcome.kind === 'unavailable')
      return { kind: 'unavailable', detail: `no ready endpoint of ${route.base} loads adapters at run time` };
    return outcome;
  }

  /** The one load of this adapter on this side, shared by every request that needs it meanwhile. */
  private ensure(
    side: 'decode' | 'prefill' | 'spill',
    route: AdapterRoute,
    pool: readonly Endpoint[],
    /** tracing on: the span of the request that starts the load (the load and unload calls' parent) */
    trace: TraceSpan | undefined,
  ): Promise<LoadOutcome> {
    const key = `${side} ${route.name}`;
    const under = this.pending.get(key);
    if (under) return under;
    const started = this.loadSomewhere(route, pool, trace).finally(() => this.pending.delete(key));
    this.pending.set(key, started);
    return started;
  }

  private async loadSomewhere(route: AdapterRoute, pool: readonly Endpoint[], trace: TraceSpan | undefined): Promise<LoadOutcome> {
    const { name, path } = route;
    if (path === undefined) return { kind: 'unavailable', detail: `${name} is not declared: it cannot be loaded` };
    const skipped = new Set<Endpoint>();
    const facts: LoaderFacts = {
      defaultSlots: this.opts.defaultSlots,
      reserved: (e) => this.reserved.get(e) ?? 0,
      evictable: (e) => this.victimOn(e) !== undefined,
      excluded: (e) => skipped.has(e) || this.coolingDown(e, name) !== undefined,
      load: (e) => this.load(e),
    };
    await this.learnSlots(pool);
    for (;;) {
      // a probe (or another request's load) may have found it loaded meanwhile
      if (pool.some((e) => isRoutable(e) && e.adapters.has(name))) return { kind: 'loaded' };
      const e = chooseLoader(name, pool, facts);
      if (!e) break;
      const outcome = await this.loadOn(e, name, route.base, path, trace);
      if (outcome.kind !== 'unsupported') return outcome;
      skipped.add(e);
    }
    // every endpoint refuses loads at run time, or failed to load it a moment ago (the engine's words, again)
    for (const e of pool) {
      const failure = this.coolingDown(e, name);
      if (failure) return failure;
    }
    return { kind: 'unsupported', detail: 'no endpoint loads adapters at run time' };
  }

  /** Asks the endpoints whose slots no scrape told (SGLang's server info) before the first load among them. */
  private async learnSlots(pool: readonly Endpoint[]): Promise<void> {
    const { admin } = this;
    if (!admin.slots) return;
    const unasked = pool.filter((e) => isRoutable(e) && e.adapterSlots === undefined && !this.slotsAsked.has(e));
    await Promise.all(
      unasked.map(async (e) => {
        this.slotsAsked.add(e);
        const slots = await admin.slots?.(e);
        if (slots !== undefined) this.catalog.recordAdapterSlots(e, slots);
      }),
    );
  }

  /** Loads the adapter on `e` after the endpoint's earlier loads and unloads, unloading one adapter when slots are full. */
  private loadOn(e: Endpoint, name: string, base: string, path: string, trace: TraceSpan | undefined): Promise<LoadOutcome> {
    this.reserved.set(e, (this.reserved.get(e) ?? 0) + 1);
    const run = async (): Promise<LoadOutcome> => {
      try {
        if (e.adapters.has(name)) return { kind: 'loaded' };
        if (freeSlots(e, { defaultSlots: this.opts.defaultSlots, reserved: () => 0 }) <= 0) await this.evictOne(e, trace);
        const started = this.now();
        const answer = trace !== undefined ? await this.admin.load(e, name, path, trace) : await this.admin.load(e, name, path);
        const seconds = (this.now() - started) / 1000;
        this.observer.loaded({ adapter: name, endpoint: e.url, result: answer.result, seconds, detail: answer.detail });
        switch (answer.result) {
          case 'loaded':
          case 'already-loaded': {
            this.catalog.recordAdapterLoading(e, true);
            this.catalog.adapterLoaded(e, name, base);
            const u = this.use(e, name);
            // found loaded by another replica or worker: theirs to unload, so this one never pulls it from under them
            if (answer.result === 'loaded') u.routerLoaded = true;
            u.lastUsed = this.now();
            this.failures.get(e)?.delete(name);
            return { kind: 'loaded' };
          }
          case 'unsupported':
            this.log.warn({ endpoint: e.url, adapter: name }, answer.detail);
            this.catalog.recordAdapterLoading(e, false);
            return { kind: 'unsupported', detail: answer.detail };
          case 'failed': {
            this.log.warn({ endpoint: e.url, adapter: name, path, detail: answer.detail }, 'adapter load failed');
            let byAdapter = this.failures.get(e);
            if (!byAdapter) {
              byAdapter = new Map();
              this.failures.set(e, byAdapter);
            }
            const failed = {
              kind: 'failed',
              detail: answer.detail,
              ...(answer.status !== undefined ? { status: answer.status } : {}),
            } as const;
            byAdapter.set(name, { until: this.now() + this.opts.cooldownMs, failed });
            return failed;
          }
        }
      } catch (err) {
        return { kind: 'failed', detail: (err as Error).message };
      } finally {
        this.reserved.set(e, (this.reserved.get(e) ?? 1) - 1);
      }
    };
    const next = (this.chains.get(e) ?? Promise.resolve()).then(run);
    this.chains.set(e, next);
    void next.then(() => {
      if (this.chains.get(e) === next) this.chains.delete(e);
    });
    return next;
  }

  /**
   * Unloads the least recently used idle adapter this router loaded on `e` (idle: no request for it in this process,
   * nor, under --workers, in any other worker, which are asked first); with none, the engine holds one more than its
   * slots, and swaps them itself.
   */
  private async evictOne(e: Endpoint, trace: TraceSpan | undefined): Promise<void> {
    if (this.victimOn(e) === undefined) return;
    let others: readonly AdapterUses[] = [];
    if (this.opts.otherWorkers) {
      try {
        others = await this.opts.otherWorkers();
      } catch (err) {
        // whether another worker streams on it is unknown: the engine holds one more instead
        this.log.warn(
          { endpoint: e.url, detail: (err as Error).message },
          'the other workers could not be asked which adapters they use; none unloaded',
        );
        return;
      }
    }
    const victim = this.victimOn(e, others);
    if (victim === undefined) return;
    // routed nowhere from now on; it was idle, so no request of this router is using it
    this.use(e, victim).routerLoaded = false;
    this.catalog.adapterGone(e, victim);
    const r = trace !== undefined ? await this.admin.unload(e, victim, trace) : await this.admin.unload(e, victim);
    if (!r.ok) this.log.warn({ endpoint: e.url, adapter: victim, detail: r.detail }, 'adapter unload failed');
    this.observer.unloaded({ adapter: victim, endpoint: e.url, reason: 'evicted', ok: r.ok, detail: r.detail });
  }

  /** The adapter to unload on `e`: one this process loaded, idle here and in `others` (other workers), least recently used by any. */
  private victimOn(e: Endpoint, others: readonly AdapterUses[] = []): string | undefined {
    const uses: AdapterUse[] = [];
    for (const [name, u] of this.uses.get(e) ?? []) {
      if (!u.routerLoaded || !e.adapters.has(name)) continue;
      let inFlight = u.inFlight + (this.claims.get(name) ?? 0);
      let lastUsed = u.lastUsed;
      for (const part of others) {
        for (const o of part.uses) {
          if (o.endpoint !== e.url || o.adapter !== name) continue;
          inFlight += o.inFlight;
          lastUsed = Math.max(lastUsed, o.lastUsed);
        }
      }
      uses.push({ name, inFlight, lastUsed });
    }
    return chooseVictim(uses);
  }

  /** A failed load of `name` on `e` within the cooldown; undefined when it may be asked. */
  private coolingDown(e: Endpoint, name: string): Extract<Prepared, { kind: 'failed' }> | undefined {
    const f = this.failures.get(e)?.get(name);
    if (!f) return undefined;
    if (f.until > this.now()) return f.failed;
    this.failures.get(e)?.delete(name);
    return undefined;
  }

  private load(e: Endpoint): number {
    return loadOf(e, this.now(), this.opts.statsIntervalMs);
  }

  private use(e: Endpoint, name: string): Use {
    let byName = this.uses.get(e);
    if (!byName) {
      byName = new Map();
      this.uses.set(e, byName);
    }
    let u = byName.get(name);
    if (!u) {
      u = { inFlight: 0, lastUsed: 0, routerLoaded: false };
      byName.set(name, u);
    }
    return u;
  }

  private forget(e: Endpoint): void {
    this.uses.delete(e);
    this.failures.delete(e);
    this.reserved.delete(e);
    this.slotsAsked.delete(e);
  }
}
