// The other router replicas' demand, read from their GET /demand: KEDA dials one replica, and that replica must answer
// for all of them. A peer that does not answer counts with its last snapshot until that is older than the grace
// period, so a replica that dies (or a slow network) never turns an active model inactive by itself.
import { request } from 'undici';
import type { Logger } from '../util/log.js';
import { parseSnapshot, withinAge, type ReceivedSnapshot } from './demand-snapshot.js';

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
  readonly now?: () => number;
}

/** A peer's answer is small; anything larger is not a snapshot. */
const MAX_BYTES = 4 * 1024 * 1024;

export class PeerDemand {
  /** by URL: a replica restarted at the same address replaces its old snapshot at once */
  private readonly last = new Map<string, ReceivedSnapshot>();
  private readonly selfUrls = new Set<string>();
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

  /** Asks every peer now; returns the snapshots that count (fresh ones, and recent ones of peers that did not answer). */
  async poll(): Promise<ReceivedSnapshot[]> {
    const urls = this.peers.urls().filter((u) => !this.selfUrls.has(u));
    await Promise.all(urls.map((u) => this.fetchOne(u)));
    const now = this.now();
    for (const [url, r] of this.last) if (now - r.receivedAt > this.opts.maxAgeMs) this.last.delete(url);
    return withinAge([...this.last.values()], now, this.opts.maxAgeMs);
  }

  private async fetchOne(url: string): Promise<void> {
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
      if (snapshot.instance === this.opts.self) {
        this.selfUrls.add(url);
        this.last.delete(url);
        return;
      }
      this.last.set(url, { snapshot, receivedAt: this.now() });
      if (this.failing.delete(url)) this.log.info({ peer: url }, 'router peer answers again');
    } catch (err) {
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
