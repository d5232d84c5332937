// Questions between the router's processes under --workers (node:cluster IPC). A worker asks the primary something
// that only the whole instance can answer (its demand, its metrics); the primary answers by gathering each worker's
// own part. So every answer is the same whichever worker a client, Prometheus or KEDA happens to reach. A worker can
// also publish news that happened in it alone (the operator's timeline); the primary relays it to every other worker.
import cluster, { type Worker } from 'node:cluster';

const TAG = 'llm-router';

type Message =
  | { tag: typeof TAG; kind: 'ask'; id: number; topic: string; value?: unknown }
  | { tag: typeof TAG; kind: 'answer'; id: number; value?: unknown; error?: string }
  | { tag: typeof TAG; kind: 'gather'; id: number; topic: string }
  | { tag: typeof TAG; kind: 'part'; id: number; value?: unknown; error?: string }
  | { tag: typeof TAG; kind: 'publish'; topic: string; value: unknown }
  | { tag: typeof TAG; kind: 'relay'; topic: string; value: unknown; from: number };

function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The primary's side: answers workers' questions, and gathers one part from every worker. */
export class ClusterHub {
  private nextId = 0;
  private readonly pending = new Map<number, { parts: Map<number, unknown>; waiting: Set<number>; done: () => void }>();
  private readonly onMessage = (worker: Worker, m: unknown): void => this.receive(worker, m);
  /** a worker that died will not answer: the gathers waiting for it end without it, at once */
  private readonly onExit = (worker: Worker): void => {
    for (const p of [...this.pending.values()]) if (p.waiting.delete(worker.id) && p.waiting.size === 0) p.done();
  };

  constructor(
    /** what workers may ask, each given the value the worker sent with its question (if any) */
    private readonly questions: Readonly<Record<string, (value: unknown) => Promise<unknown>>>,
    /** a gather ended without some worker's part (it did not answer within the time given) */
    private readonly onMissed: (topic: string, missing: number) => void = () => undefined,
  ) {
    cluster.on('message', this.onMessage);
    cluster.on('exit', this.onExit);
  }

  stop(): void {
    cluster.off('message', this.onMessage);
    cluster.off('exit', this.onExit);
    for (const p of this.pending.values()) p.done();
  }

  /** Sends news to every connected worker (handled by its onRelay(topic), from worker 0: the primary). */
  broadcast(topic: string, value: unknown): void {
    for (const w of Object.values(cluster.workers ?? {})) {
      if (!w?.isConnected()) continue;
      w.send({ tag: TAG, kind: 'relay', topic, value, from: 0 } satisfies Message);
    }
  }

  /** Each connected worker's answer to `topic`; a worker that does not answer within `timeoutMs` is left out. */
  gather(topic: string, timeoutMs: number): Promise<Map<number, unknown>> {
    const id = this.nextId++;
    const parts = new Map<number, unknown>();
    const waiting = new Set<number>();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(parts);
      };
      const timer = setTimeout(() => {
        if (waiting.size > 0) this.onMissed(topic, waiting.size);
        done();
      }, timeoutMs);
      this.pending.set(id, { parts, waiting, done });
      for (const w of Object.values(cluster.workers ?? {})) {
        if (!w?.isConnected()) continue;
        waiting.add(w.id);
        w.send({ tag: TAG, kind: 'gather', id, topic } satisfies Message);
      }
      if (waiting.size === 0) done();
    });
  }

  private receive(worker: Worker, m: unknown): void {
    if (!isMessage(m)) return;
    if (m.kind === 'part') {
      const p = this.pending.get(m.id);
      if (!p?.waiting.delete(worker.id)) return;
      if (m.error === undefined) p.parts.set(worker.id, m.value);
      if (p.waiting.size === 0) p.done();
    } else if (m.kind === 'publish') {
      for (const w of Object.values(cluster.workers ?? {})) {
        if (!w || w.id === worker.id || !w.isConnected()) continue;
        w.send({ tag: TAG, kind: 'relay', topic: m.topic, value: m.value, from: worker.id } satisfies Message);
      }
    } else if (m.kind === 'ask') {
      const question = this.questions[m.topic];
      const reply = (r: { value?: unknown; error?: string }): void => {
        if (worker.isConnected()) worker.send({ tag: TAG, kind: 'answer', id: m.id, ...r } satisfies Message);
      };
      if (!question) return reply({ error: `no such question: ${m.topic}` });
      question(m.value).then(
        (value) => reply({ value }),
        (err: unknown) => reply({ error: errorText(err) }),
      );
    }
  }
}

/** A worker's side: gives its own part when the primary gathers, and asks the primary for whole-instance answers. */
export class WorkerLink {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly onMessage = (m: unknown): void => this.receive(m);
  private readonly relayed = new Map<string, (value: unknown, fromWorker: number) => void>();

  constructor(private readonly parts: Readonly<Record<string, () => unknown>>) {
    process.on('message', this.onMessage);
  }

  stop(): void {
    process.off('message', this.onMessage);
    for (const p of this.pending.values()) p.reject(new Error('the router is stopping'));
    this.pending.clear();
    this.relayed.clear();
  }

  /** Sends news to every other worker (through the primary); nothing comes back. */
  publish(topic: string, value: unknown): void {
    if (process.connected) process.send?.({ tag: TAG, kind: 'publish', topic, value } satisfies Message);
  }

  /** What other workers publish on `topic` (one handler per topic), with the id of the worker it came from. */
  onRelay(topic: string, handler: (value: unknown, fromWorker: number) => void): void {
    this.relayed.set(topic, handler);
  }

  ask(topic: string, timeoutMs: number, value?: unknown): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the primary process did not answer "${topic}" within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      process.send?.({ tag: TAG, kind: 'ask', id, topic, ...(value === undefined ? {} : { value }) } satisfies Message);
    });
  }

  private receive(m: unknown): void {
    if (!isMessage(m)) return;
    if (m.kind === 'relay') {
      this.relayed.get(m.topic)?.(m.value, m.from);
    } else if (m.kind === 'answer') {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(m.error));
      else p.resolve(m.value);
    } else if (m.kind === 'gather') {
      const part = this.parts[m.topic];
      const send = (r: { value?: unknown; error?: string }): void => {
        if (process.connected) process.send?.({ tag: TAG, kind: 'part', id: m.id, ...r } satisfies Message);
      };
      if (!part) return send({ error: `no such part: ${m.topic}` });
      Promise.resolve()
        .then(part)
        .then(
          (value) => send({ value }),
          (err: unknown) => send({ error: errorText(err) }),
        );
    }
  }
}
