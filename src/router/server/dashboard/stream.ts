// GET /events: the dashboard's state as server-sent events. A client first gets `snapshot` (the state and the recent
// timeline), then `timeline` for each event as it happens and `state` whenever the state changed (checked on every
// event and every tick), and a comment line as a heartbeat. What a client has not read is bounded: a client that falls
// that far behind is disconnected (EventSource reconnects and starts again from a snapshot), so a slow or stalled
// reader never makes the router hold more memory.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../util/log.js';
import { errors, sendError } from '../errors.js';
import type { Timeline, TimelineEvent } from './timeline.js';
import type { DashboardState } from './view.js';

export interface StreamOptions {
  /** how often the state is recomputed while a client is connected */
  readonly tickMs: number;
  /** a comment line after this long without a message, so proxies and the browser keep the connection */
  readonly heartbeatMs: number;
  /** streams open at once on this process */
  readonly maxClients: number;
  /** bytes written to a client and not yet taken by its socket, beyond which the client is dropped */
  readonly maxBufferedBytes: number;
  /** timeline events in the first snapshot */
  readonly snapshotEvents: number;
}

export const STREAM_DEFAULTS: StreamOptions = {
  tickMs: 1_000,
  heartbeatMs: 15_000,
  maxClients: 32,
  maxBufferedBytes: 1024 * 1024,
  snapshotEvents: 200,
};

export interface StateSource {
  /** the present state */
  state(): Promise<DashboardState>;
}

/** how long EventSource waits before reconnecting, ms */
const RECONNECT_MS = 2_000;

export class EventStream {
  private readonly clients = new Set<ServerResponse>();
  /** streams admitted and not yet in `clients` (their first state is being computed): they count against the cap */
  private readonly starting = new Set<ServerResponse>();
  private lastState = '';
  private tick: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private refreshing = false;
  private refreshAgain = false;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;
  /** clients dropped for reading too slowly, since start */
  dropped = 0;

  constructor(
    private readonly source: StateSource,
    private readonly timeline: Timeline,
    private readonly log: Logger,
    private readonly opts: StreamOptions = STREAM_DEFAULTS,
  ) {}

  start(): void {
    this.unsubscribe = this.timeline.subscribe((e) => this.onEvent(e));
  }

  /** Ends every stream (shutdown: the clients reconnect to a replica that stays). */
  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    this.idle();
    for (const res of this.clients) res.end();
    this.clients.clear();
    // streams still computing their first state (which may wait on the other workers) end now too
    for (const res of this.starting) res.end();
    this.starting.clear();
  }

  get connected(): number {
    return this.clients.size;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.stopped) return sendError(res, errors.shuttingDown());
    // the slot is taken here, before any await: connects that arrive together cannot pass the cap between the check
    // and the stream's start
    if (this.clients.size + this.starting.size >= this.opts.maxClients) return sendError(res, errors.tooManyStreams(this.opts.maxClients));
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      // reverse proxies (nginx, ingress controllers) pass events on at once instead of buffering them
      'x-accel-buffering': 'no',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    this.starting.add(res);
    let state: DashboardState;
    try {
      state = await this.source.state();
    } finally {
      this.starting.delete(res);
    }
    if (res.destroyed || res.writableEnded) return;
    if (this.stopped) {
      res.end();
      return;
    }
    const snapshot = { state, timeline: this.timeline.recent(this.opts.snapshotEvents) };
    res.write(`retry: ${RECONNECT_MS}\n\n`);
    this.clients.add(res);
    res.on('close', () => this.leave(res));
    this.send(res, frame('snapshot', JSON.stringify(snapshot)));
    this.busy();
  }

  private leave(res: ServerResponse): void {
    this.clients.delete(res);
    if (this.clients.size === 0) this.idle();
  }

  private busy(): void {
    if (this.tick || this.stopped) return;
    this.tick = setInterval(() => void this.refresh(), this.opts.tickMs);
    this.heartbeat = setInterval(() => this.broadcast(': heartbeat\n\n'), this.opts.heartbeatMs);
  }

  private idle(): void {
    clearInterval(this.tick);
    clearInterval(this.heartbeat);
    this.tick = undefined;
    this.heartbeat = undefined;
    this.lastState = '';
  }

  private onEvent(e: TimelineEvent): void {
    if (this.clients.size === 0) return;
    this.broadcast(frame('timeline', JSON.stringify(e)));
    void this.refresh();
  }

  /** Recomputes the state and sends it if anything in it changed; concurrent calls run once more, not in parallel. */
  private async refresh(): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      const state = await this.source.state();
      // `at` moves on every call: only a change of anything else is news
      const { at: _at, ...rest } = state;
      const key = JSON.stringify(rest);
      if (key !== this.lastState && this.clients.size > 0) {
        this.lastState = key;
        this.broadcast(frame('state', JSON.stringify(state)));
      }
    } catch (err) {
      this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'dashboard state could not be computed');
    } finally {
      this.refreshing = false;
      if (this.refreshAgain) {
        this.refreshAgain = false;
        void this.refresh();
      }
    }
  }

  private broadcast(text: string): void {
    for (const res of this.clients) this.send(res, text);
  }

  private send(res: ServerResponse, text: string): void {
    if (res.writableLength > this.opts.maxBufferedBytes) {
      this.dropped++;
      this.log.info(
        { buffered: res.writableLength, limit: this.opts.maxBufferedBytes },
        'an /events client read too slowly and was disconnected',
      );
      this.clients.delete(res);
      res.destroy();
      if (this.clients.size === 0) this.idle();
      return;
    }
    res.write(text);
  }
}

/** One server-sent event; `data` is one line of JSON (JSON.stringify escapes line breaks inside strings). */
function frame(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}
