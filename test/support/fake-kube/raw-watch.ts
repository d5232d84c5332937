// A bare watch client over node:http, for tests that check the wire protocol itself.
import http from 'node:http';

export interface RawEvent {
  readonly type: string;
  readonly object: {
    kind?: string;
    code?: number;
    reason?: string;
    metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> };
  };
}

export interface RawWatch {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly events: RawEvent[];
  /** resolves when the server has ended the response cleanly */
  readonly ended: Promise<void>;
  /** resolves once `n` events arrived (rejects after timeoutMs) */
  waitForEvents(n: number, timeoutMs?: number): Promise<RawEvent[]>;
  close(): void;
}

/** GETs `url` and resolves as soon as the response headers arrive, before any event. */
export function rawWatch(url: string, timeoutMs = 5000): Promise<RawWatch> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      clearTimeout(timer);
      const events: RawEvent[] = [];
      const waiters = new Set<() => void>();
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line.trim() !== '') events.push(JSON.parse(line) as RawEvent);
        }
        for (const w of waiters) w();
      });
      const ended = new Promise<void>((done, fail) => {
        res.on('end', () => done());
        res.on('error', fail);
      });
      ended.catch(() => undefined);
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        ended,
        waitForEvents(n, waitMs = 3000) {
          if (events.length >= n) return Promise.resolve(events);
          return new Promise((ok, fail) => {
            const t = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`expected ${n} events, got ${JSON.stringify(events)}`));
            }, waitMs);
            const check = (): void => {
              if (events.length < n) return;
              clearTimeout(t);
              waiters.delete(check);
              ok(events);
            };
            waiters.add(check);
          });
        },
        close: () => req.destroy(),
      });
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no response headers from ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
