// LoRA adapters in the simulated engine (--enable-lora), as vLLM serves them by default: adapters given at start
// (--lora-modules) and loaded at run time (POST /v1/load_lora_adapter: 400 when the name is loaded already, 404 for a
// path with no adapter; POST /v1/unload_lora_adapter: 404 for an unknown name; both paths 404 "Not Found" without
// runtime loading), listed in /v1/models with a `parent`, and at most --max-loras of them running in one batch
// (requests for another adapter wait: vllm:lora_requests_info's running and waiting adapters). With --engine-kind
// sglang the admin API is SGLang's (lora-sglang.ts). Loads take --lora-load-delay-ms each, one after another. A restart
// (the refuse fault) keeps only the adapters given at start, as a new engine process would.
import type http from 'node:http';
import type { KvDemand, SlotLease, SlotQueue } from './queue.js';
import { BodyError, readJsonObject, sendJson } from './http-io.js';
import { errorBody } from './openai.js';
import { escapeLabel } from './metrics.js';

/** load and unload calls GET /_sim/stats keeps, newest last */
const KEPT_CALLS = 64;

/** What a load call came to, before the engine kind words it. */
export type LoadOutcome = 'invalid' | 'exists' | 'no-adapter' | 'full' | 'loaded';
/** What an unload call came to. */
export type UnloadOutcome = 'invalid' | 'unknown' | 'unloaded';

/** An answer of the admin API: a JSON body, or plain text. */
export interface AdminReply {
  readonly status: number;
  readonly body: object | string;
}

/** How one engine kind serves the adapter admin API: its paths and the words of its answers. */
export interface LoraFlavour {
  readonly loadPath: string;
  readonly unloadPath: string;
  /** `owned_by` of the adapters' /v1/models cards */
  readonly owner: string;
  /** the answer of either path when the engine does not load adapters at run time (no --enable-lora, or switched off) */
  disabled(): AdminReply;
  load(outcome: LoadOutcome, call: { name: string; path: string; loaded: ReadonlyMap<string, string>; maxLoaded: number }): AdminReply;
  unload(outcome: UnloadOutcome, call: { name: string; loaded: ReadonlyMap<string, string> }): AdminReply;
}

/** vLLM's words: plain-text success, OpenAI error bodies, 404 "Not Found" without runtime updating. */
export const VLLM_LORA: LoraFlavour = {
  loadPath: '/v1/load_lora_adapter',
  unloadPath: '/v1/unload_lora_adapter',
  owner: 'vllm',
  disabled: () => ({ status: 404, body: { detail: 'Not Found' } }),
  load(outcome, { name, path }) {
    switch (outcome) {
      case 'invalid':
        return vllmError(400, "Both 'lora_name' and 'lora_path' must be provided.", 'BadRequestError');
      case 'exists':
        return vllmError(400, `The lora adapter '${name}' has already been loaded.`, 'BadRequestError');
      case 'no-adapter':
        return vllmError(404, `Loading lora ${name} failed: No adapter found for ${path}`, 'NotFoundError');
      case 'full':
        // flags.ts refuses --max-loaded-loras for vLLM: it has no such limit
        throw new Error('vLLM has no limit of loaded adapters');
      case 'loaded':
        return { status: 200, body: `Success: LoRA adapter '${name}' added successfully.` };
    }
  },
  unload(outcome, { name }) {
    switch (outcome) {
      case 'invalid':
        return vllmError(400, "'lora_name' needs to be provided to unload a LoRA adapter.", 'BadRequestError');
      case 'unknown':
        return vllmError(404, `The lora adapter '${name}' cannot be found.`, 'NotFoundError');
      case 'unloaded':
        return { status: 200, body: `Success: LoRA adapter '${name}' removed successfully.` };
    }
  },
};

function vllmError(status: number, message: string, type: string): AdminReply {
  return { status, body: errorBody(message, type, status) };
}

export interface SimLoraOptions {
  /** adapters running in one batch at most (vLLM's --max-loras) */
  readonly maxLoras: number;
  /** adapters loaded at start, name -> path (vLLM's --lora-modules) */
  readonly modules: ReadonlyMap<string, string>;
  /** a load call takes this long before it answers */
  readonly loadDelayMs: number;
  /** lora_path values with no adapter: their load answers vLLM's 404 "No adapter found" */
  readonly missingPaths: ReadonlySet<string>;
  /** the load and unload paths exist (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING; SGLang always has them) */
  readonly runtimeUpdating: boolean;
  /** adapters registered at most, 0 for no limit (SGLang's --max-loaded-loras; vLLM has no such limit) */
  readonly maxLoaded: number;
}

/** One load or unload call as the engine answered it. */
export interface LoraCall {
  readonly op: 'load' | 'unload';
  readonly name: string;
  readonly path: string | null;
  readonly status: number;
}

export interface SimLoraStats {
  /** adapters loaded now, in load order */
  readonly loaded: string[];
  /** load calls that loaded an adapter, and unload calls that removed one */
  readonly loads: number;
  readonly unloads: number;
  /** the last load and unload calls, whatever their answer */
  readonly calls: LoraCall[];
  /** inference requests per adapter */
  readonly requests: Record<string, number>;
}

interface Waiter {
  readonly adapter: string;
  readonly start: () => void;
  readonly lease: GateLease;
}

class GateLease {
  started = false;
  released = false;
  constructor(readonly adapter: string) {}
}

export class SimLora {
  /** name -> path, in load order */
  private loaded: Map<string, string>;
  /** loads under way per name: a second load of the name waits for the first, as vLLM's per-name lock makes it */
  private readonly loading = new Map<string, Promise<void>>();
  /** the engine reads one adapter at a time: loads of different names queue behind each other */
  private readingDone: Promise<void> = Promise.resolve();
  /** requests running per adapter, and those waiting for a batch with room for their adapter (FIFO) */
  private readonly running = new Map<string, number>();
  private readonly waiters: Waiter[] = [];
  private counters = { loads: 0, unloads: 0, calls: [] as LoraCall[], requests: {} as Record<string, number> };

  constructor(
    private readonly o: SimLoraOptions,
    readonly flavour: LoraFlavour = VLLM_LORA,
  ) {
    this.loaded = new Map(o.modules);
  }

  get maxLoras(): number {
    return this.o.maxLoras;
  }

  get maxLoaded(): number {
    return this.o.maxLoaded;
  }

  /** names loaded now, in load order */
  names(): string[] {
    return [...this.loaded.keys()];
  }

  has(name: string): boolean {
    return this.loaded.has(name);
  }

  /** The adapters as /v1/models lists them: each with its path as `root` and the base model as `parent`. */
  modelCards(parent: string, created: number): object[] {
    return [...this.loaded].map(([id, path]) => ({
      id,
      object: 'model',
      created,
      owned_by: this.flavour.owner,
      root: path,
      parent,
      max_model_len: null,
    }));
  }

  /** A new engine process: only the adapters given at start are loaded, and nothing runs. */
  restart(): void {
    this.loaded = new Map(this.o.modules);
  }

  counted(adapter: string): void {
    this.counters.requests[adapter] = (this.counters.requests[adapter] ?? 0) + 1;
  }

  stats(): SimLoraStats {
    return {
      loaded: [...this.loaded.keys()],
      loads: this.counters.loads,
      unloads: this.counters.unloads,
      calls: [...this.counters.calls],
      requests: { ...this.counters.requests },
    };
  }

  resetStats(): void {
    this.counters = { loads: 0, unloads: 0, calls: [], requests: {} };
  }

  /** Requests waiting because their adapter has no room in the batch. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Admits a request to the batch: one for an adapter starts when that adapter runs already or fewer than max-loras
   * adapters do, else it waits (in arrival order); then it takes a batch slot from `queue`. Base-model requests only
   * take the slot (and the room for their KV cache, `demand`).
   */
  admit(queue: SlotQueue, adapter: string | undefined, start: () => void, demand?: KvDemand): SlotLease {
    if (adapter === undefined) return queue.admit(start, demand);
    let slot: SlotLease | undefined;
    const gate = new GateLease(adapter);
    const enter = (): void => {
      slot = queue.admit(start, demand);
    };
    // as vLLM's scheduler, a request whose adapter fits goes ahead of those waiting for room for theirs
    if (this.fits(adapter)) this.enter(gate, enter);
    else this.waiters.push({ adapter, start: enter, lease: gate });
    return {
      get started(): boolean {
        return slot?.started ?? false;
      },
      release: () => {
        slot?.release();
        this.leave(gate);
      },
    };
  }

  /** vllm:lora_requests_info: max_lora and the running and waiting adapters as labels; the value is the time, as vLLM sets it. */
  metricLines(): string[] {
    const waiting = [...new Set(this.waiters.map((w) => w.adapter))];
    const labels = `max_lora="${this.o.maxLoras}",running_lora_adapters="${escapeLabel([...this.running.keys()].join(','))}",waiting_lora_adapters="${escapeLabel(waiting.join(','))}"`;
    return [
      '# HELP vllm:lora_requests_info Running stats on lora requests.',
      '# TYPE vllm:lora_requests_info gauge',
      `vllm:lora_requests_info{${labels}} ${Date.now() / 1000}`,
    ];
  }

  /** Answers a POST to the load or unload path. */
  async answer(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    if (!this.o.runtimeUpdating && this.flavour === VLLM_LORA) {
      req.resume();
      return reply(res, this.flavour.disabled());
    }
    let body: Record<string, unknown>;
    try {
      body = await readJsonObject(req);
    } catch (err) {
      if (err instanceof BodyError && err.status === 499) return;
      return sendJson(res, 400, errorBody((err as Error).message, 'BadRequestError', 400));
    }
    const name = typeof body.lora_name === 'string' ? body.lora_name : '';
    const lpath = typeof body.lora_path === 'string' ? body.lora_path : '';
    const isLoad = path === this.flavour.loadPath;
    const answer = isLoad
      ? this.flavour.load(await this.load(name, lpath), { name, path: lpath, loaded: this.loaded, maxLoaded: this.o.maxLoaded })
      : this.flavour.unload(this.unload(name), { name, loaded: this.loaded });
    this.counters.calls.push({ op: isLoad ? 'load' : 'unload', name, path: lpath || null, status: answer.status });
    if (this.counters.calls.length > KEPT_CALLS) this.counters.calls.shift();
    reply(res, answer);
  }

  private async load(name: string, path: string): Promise<LoadOutcome> {
    if (!name || !path) return 'invalid';
    const under = this.loading.get(name);
    if (under) await under;
    if (this.o.maxLoaded > 0 && this.loaded.size >= this.o.maxLoaded) return 'full';
    if (this.loaded.has(name)) return 'exists';
    let done: () => void = () => undefined;
    this.loading.set(name, new Promise<void>((resolve) => (done = resolve)));
    try {
      const previous = this.readingDone;
      let read: () => void = () => undefined;
      this.readingDone = new Promise<void>((resolve) => (read = resolve));
      await previous;
      if (this.o.loadDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.o.loadDelayMs));
      read();
      if (this.o.missingPaths.has(path)) return 'no-adapter';
      this.loaded.set(name, path);
      this.counters.loads++;
      return 'loaded';
    } finally {
      this.loading.delete(name);
      done();
    }
  }

  private unload(name: string): UnloadOutcome {
    if (!name) return 'invalid';
    if (!this.loaded.has(name)) return 'unknown';
    this.loaded.delete(name);
    this.counters.unloads++;
    return 'unloaded';
  }

  private fits(adapter: string): boolean {
    return this.running.has(adapter) || this.running.size < this.o.maxLoras;
  }

  private enter(gate: GateLease, start: () => void): void {
    gate.started = true;
    this.running.set(gate.adapter, (this.running.get(gate.adapter) ?? 0) + 1);
    start();
  }

  private leave(gate: GateLease): void {
    if (gate.released) return;
    gate.released = true;
    if (!gate.started) {
      const i = this.waiters.findIndex((w) => w.lease === gate);
      if (i >= 0) this.waiters.splice(i, 1);
      return;
    }
    const left = (this.running.get(gate.adapter) ?? 1) - 1;
    if (left > 0) this.running.set(gate.adapter, left);
    else this.running.delete(gate.adapter);
    // waiters in arrival order, each as soon as its adapter fits
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i] as Waiter;
      if (!this.fits(w.adapter)) {
        i++;
        continue;
      }
      this.waiters.splice(i, 1);
      this.enter(w.lease, w.start);
    }
  }
}

/** Writes an admin answer: JSON, or plain text as vLLM's successes are. */
export function reply(res: http.ServerResponse, answer: AdminReply): void {
  if (typeof answer.body !== 'string') return sendJson(res, answer.status, answer.body);
  res.writeHead(answer.status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}
