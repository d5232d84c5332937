// The other router replicas' demand, read from their GET /demand: KEDA dials one replica, and that replica must answer
// for all of them. Snapshots are kept per instance (the id every replica puts in its answer), not per URL: one
// instance reached by two URLs counts once, and a replica restarted at the same address is a new instance.
// A peer that does not answer counts with its last snapshot until that is older than the grace period, so a replica
// that dies (or a slow network) never turns an active model inactive by itself. A peer that stops cleanly says so (its
// /demand answers carry `stopping`, and it sends a last notice, POST /demand, when it has answered everything): it is
// dropped as soon as it holds nothing and has nothing in flight.
import { request } from 'undici';
import type { PeerStatus } from '../metrics/scaler-metrics.js';
import type { Logger } from '../util/log.js';
import { parseSnapshot, pending, type DemandSnapshot, type ReceivedSnapshot } from './demand-snapshot.js';

/** Where the peers are: admin base URLs (http://10.0.0.7:9090). May include this router itself. */
export interface PeerList {
  urls(): readonly string[];
  stop(): void;
}

export class StaticPeers implements PeerList {
  constructor(private readonly list: readonly string[]) {}
  urls(): readonly string[] {
    return this.list;
  }
  stop(): void {}
}

export interface PeerDemandOptions {
  /** this router's instance id: a peer URL that turns out to be this router is not counted twice */
  readonly self: string;
  readonly timeoutMs: number;
  /** how long a peer's last snapshot keeps counting after it stopped answering (the grace period) */
  readonly maxAgeMs: number;
  /** sent to peers whose /demand sits behind API keys (no --admin-port): replicas share their keys */
  readonly authorization?: () => string | undefined;
  /** a URL that answered with this router's own id is asked again after this long (a Service URL may move), ms */
  readonly selfRecheckMs?: number;
  readonly now?: () => number;
}

/** A peer's answer is small; anything larger is not a snapshot. */
const MAX_BYTES = 4 * 1024 * 1024;
const SELF_RECHECK_MS = 60_000;

/**
 * How long a peer has to take this instance's farewell: the peer timeout, but at least 2 s. Nothing waits on the last
 * word but this instance's own exit, and a peer that misses it counts this instance for the whole grace period; on a
 * busy node 500 ms is too little for a peer running --workers (its worker hands the notice to its primary).
 */
export function farewellTimeoutMs(peerTimeoutMs: number): number {
  return Math.max(peerTimeoutMs, 2_000);
}

/** What became of a farewell: the peers that took it, and the ones that did not (each with why). */
export interface FarewellOutcome {
  readonly told: number;
  readonly missed: readonly { readonly url: string; readonly error: string }[];
}

interface UrlState {
  up: boolean;
  lastOkAt: number | undefined;
  /** the URL answered with this router's id: skipped until then */
  selfUntil: number | undefined;
}

export class PeerDemand {
  /** by instance id: the newest snapshot of each, whichever URL brought it */
  private readonly last = new Map<string, ReceivedSnapshot>();
  /** instances that stopped cleanly, and when they said so: a late answer from them does not bring them back */
  private readonly departed = new Map<string, number>();
  private readonly byUrl = new Map<string, UrlState>();
  /** URLs whose last poll failed, so a peer's trouble is logged once, not every poll */
  private readonly failing = new Set<string>();
  private readonly now: () => number;

  constructor(
    private readonly peers: PeerList,
    private readonly opts: PeerDemandOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
  }

  stop(): void {
    this.peers.stop();
  }

  /** Asks every peer now; returns the snapshots that count, one per instance (fresh ones, and recent ones of peers that did not answer). */
  async poll(): Promise<ReceivedSnapshot[]> {
    const start = this.now();
    const urls = this.peers.urls().filter((u) => {
      const until = this.byUrl.get(u)?.selfUntil;
      return until === undefined || start >= until;
    });
    await Promise.all(urls.map((u) => this.fetchOne(u)));
    const now = this.now();
    for (const [instance, r] of this.last) if (now - r.receivedAt > this.opts.maxAgeMs) this.last.delete(instance);
    for (const [instance, at] of this.departed) if (now - at > this.opts.maxAgeMs) this.departed.delete(instance);
    const listed = new Set(this.peers.urls());
    for (const url of this.byUrl.keys()) if (!listed.has(url)) this.byUrl.delete(url);
    for (const url of this.failing) if (!listed.has(url)) this.failing.delete(url);
    return [...this.last.values()];
  }

  /** A peer's notice (POST /demand): usually its last word as it stops. */
  notice(snapshot: DemandSnapshot): void {
    if (snapshot.instance === this.opts.self) return;
    this.take(snapshot, this.now(), false);
  }

  /** Tells every peer this instance is leaving, with its last snapshot (stopping, held and in flight answered). */
  async farewell(snapshot: DemandSnapshot): Promise<FarewellOutcome> {
    const body = JSON.stringify(snapshot);
    const timeoutMs = farewellTimeoutMs(this.opts.timeoutMs);
    const urls = this.peers.urls().filter((u) => this.byUrl.get(u)?.selfUntil === undefined);
    const missed: { url: string; error: string }[] = [];
    await Promise.all(
      urls.map(async (url) => {
        try {
          const auth = this.opts.authorization?.();
          const res = await request(`${url}/demand`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
            body,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
            signal: AbortSignal.timeout(timeoutMs),
          });
          await res.body.dump();
          if (res.statusCode >= 300) missed.push({ url, error: `POST /demand answered ${res.statusCode}` });
        } catch (err) {
          // a peer that does not hear it counts this instance's last snapshot for the grace period, as before
          missed.push({ url, error: err instanceof Error ? err.message : String(err) });
        }
      }),
    );
    return { told: urls.length - missed.length, missed };
  }

  /** Each listed peer URL (this router's own excluded): up, and how old its last snapshot is. */
  status(): PeerStatus[] {
    const now = this.now();
    const out: PeerStatus[] = [];
    for (const url of this.peers.urls()) {
      const s = this.byUrl.get(url);
      if (s?.selfUntil !== undefined) continue;
      out.push({
        url,
        up: s?.up ?? false,
        ageSeconds: s?.lastOkAt === undefined ? undefined : Math.max(0, now - s.lastOkAt) / 1000,
      });
    }
    return out;
  }

  /** `asked`: the answer to this router's own GET (a notice is only what its sender says of itself) */
  private take(snapshot: DemandSnapshot, now: number, asked: boolean): void {
    if (this.departed.has(snapshot.instance)) {
      // a late or second-hand word from an instance that left does not bring it back; only the instance itself,
      // asked and not stopping, does (so a notice claiming another's id cannot drop it for longer than one poll)
      if (snapshot.stopping || !asked) return;
      this.departed.delete(snapshot.instance);
    }
    if (snapshot.stopping && pending(snapshot) === 0) {
      // it stopped cleanly and has answered everything: it no longer needs an engine
      this.last.delete(snapshot.instance);
      this.departed.set(snapshot.instance, now);
      return;
    }
    const prev = this.last.get(snapshot.instance);
    // two URLs to one instance: its own clock orders its answers
    if (prev && prev.snapshot.at > snapshot.at) return;
    this.last.set(snapshot.instance, { snapshot, receivedAt: now });
  }

  private state(url: string): UrlState {
    let s = this.byUrl.get(url);
    if (!s) {
      s = { up: false, lastOkAt: undefined, selfUntil: undefined };
      this.byUrl.set(url, s);
    }
    return s;
  }

  private async fetchOne(url: string): Promise<void> {
    const state = this.state(url);
    try {
      const auth = this.opts.authorization?.();
      const res = await request(`${url}/demand`, {
        headers: auth ? { authorization: auth } : {},
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_BYTES) throw new Error(`answer larger than ${MAX_BYTES} bytes`);
        chunks.push(chunk);
      }
      if (res.statusCode !== 200) throw new Error(`GET /demand answered ${res.statusCode}`);
      const snapshot = parseSnapshot(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      if (!snapshot) throw new Error('GET /demand answered something that is not a demand snapshot');
      const now = this.now();
      if (snapshot.instance === this.opts.self) {
        // this router itself (a Service URL, or its own address listed): asked again later, since it may move
        state.selfUntil = now + (this.opts.selfRecheckMs ?? SELF_RECHECK_MS);
        state.up = true;
        return;
      }
      state.selfUntil = undefined;
      state.up = true;
      state.lastOkAt = now;
      this.take(snapshot, now, true);
      if (this.failing.delete(url)) this.log.info({ peer: url }, 'router peer answers again');
    } catch (err) {
      state.up = false;
      if (!this.failing.has(url)) {
        this.failing.add(url);
        this.log.warn(
          { peer: url, error: err instanceof Error ? err.message : String(err), countsUntilSeconds: Math.round(this.opts.maxAgeMs / 1000) },
          'router peer did not answer GET /demand; its last snapshot counts until it is older than the grace period',
        );
      }
    }
  }
}
