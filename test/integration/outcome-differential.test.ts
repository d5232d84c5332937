// The same engine failure is the same outcome on both inbound paths. Each engine fault (refused, reset before the
// head, reset mid-body, a body cut short of its Content-Length, bad framing, timeouts before the head and mid-body,
// a stream cut mid-event) runs through a router with the fast path (the default) and one with node:http
// (--fast-path false), and what each router makes of it is compared: the status in its access log, its
// llm_router_requests_total and llm_router_errors_total, and the passive-health failures it counted against the
// engine (llm_router_upstream_failures_total{endpoint,kind}, what the prober is told).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import { stopAll } from '../support/process.js';
import { RawEngine } from '../support/raw-engine.js';
import { RawClient } from '../support/raw-http.js';
import { call, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { until } from '../support/within.js';

const MODEL = 'diff';
const HEAD_JSON = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n';
const HEAD_SSE = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n';

/** engine faults by x-case; each writes its misbehaviour on the socket the request came on */
const FAULTS: Record<string, (s: net.Socket) => void> = {
  'reset-before-head': (s) => s.resetAndDestroy(),
  'close-before-head': (s) => s.destroy(),
  'reset-mid-body': (s) => {
    s.write(`${HEAD_JSON}content-length: 1000\r\n\r\n{"partial":`);
    setTimeout(() => s.resetAndDestroy(), 20);
  },
  'close-mid-chunked-body': (s) => {
    s.write(`${HEAD_JSON}transfer-encoding: chunked\r\n\r\nb\r\n{"partial":\r\n`);
    setTimeout(() => s.destroy(), 20);
  },
  'truncated-content-length': (s) => {
    s.write(`${HEAD_JSON}content-length: 1000\r\n\r\n{"partial":`);
    setTimeout(() => s.end(), 20);
  },
  'bad-framing': (s) => s.write(`${HEAD_JSON}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`),
  'bad-chunk-mid-body': (s) => {
    s.write(`${HEAD_JSON}transfer-encoding: chunked\r\n\r\nb\r\n{"partial":\r\n`);
    setTimeout(() => s.write('zz\r\n'), 20);
  },
  'headers-timeout': () => undefined,
  'idle-timeout-mid-body': (s) => s.write(`${HEAD_JSON}content-length: 1000\r\n\r\n{"partial":`),
  'sse-reset-mid-event': (s) => {
    s.write(HEAD_SSE);
    s.write('f\r\ndata: {"n":1}\n\n\r\n9\r\ndata: {"n');
    setTimeout(() => s.resetAndDestroy(), 20);
  },
  'engine-500': (s) => s.write(`HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`),
};

/** The samples of the families that say how requests ended, as `name{labels}` -> value. */
async function outcomeSamples(router: Running): Promise<Map<string, number>> {
  const text = (await call(`${router.url}/metrics`)).text;
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^(llm_router_(?:requests|errors|upstream_failures)_total\{[^}]*\}) (\S+)$/gm))
    out.set(m[1] as string, Number(m[2]));
  return out;
}

/** What changed between two samples (only what grew). */
function delta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of after) if (v !== (before.get(k) ?? 0)) out[k] = v - (before.get(k) ?? 0);
  return out;
}

describe('the fast path and node:http report the same outcome for the same engine failure', { timeout: 180_000 }, () => {
  let engine: RawEngine;
  /** an engine that is ready, then gone: its port refuses */
  let doomed: RawEngine;
  const routers: { name: string; router: Running }[] = [];

  before(async () => {
    [engine, doomed] = await Promise.all([RawEngine.start([MODEL]), RawEngine.start(['refused'])]);
    for (const [name, fault] of Object.entries(FAULTS)) engine.cases.set(name, fault);
    for (const [name, args] of [
      ['fast path', []],
      ['node:http', ['--fast-path', 'false']],
    ] as const) {
      const router = await startRouter([
        '--static-backends',
        `${engine.origin},${doomed.origin}`,
        '--static-models',
        `${MODEL},refused`,
        // one failure must not take the engine away from the next case; probes of a ready engine are rare
        '--passive-failure-threshold',
        '100000',
        '--probe-interval',
        '0.2',
        '--probe-ready-interval',
        '60',
        '--response-timeout',
        '0.5',
        '--idle-timeout',
        '0.5',
        '--log-level',
        'info',
        ...args,
      ]);
      routers.push({ name, router });
      await waitModelStatus(router.url, MODEL, 'ready');
      await waitModelStatus(router.url, 'refused', 'ready');
    }
  });
  after(async () => {
    await stopAll();
    await Promise.all([engine?.close(), doomed?.close()]);
  });

  /** Sends one request and returns what the router recorded of it: its access-log status and its metric deltas. */
  async function run(
    router: Running,
    model: string,
    kase: string,
    id: string,
  ): Promise<{ status: number; metrics: Record<string, number> }> {
    const before = await outcomeSamples(router);
    const body = JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'hi' }],
      ...(kase.startsWith('sse') ? { stream: true } : {}),
    });
    const client = await RawClient.connect(router.port);
    await client.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\ncontent-type: application/json\r\nx-request-id: ${id}\r\nx-case: ${kase}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await client.next(10_000).catch(() => undefined);
    const logged = new RegExp(`"requestId":"${id}"[^\\n]*"status":(\\d+)`);
    await until(`${id}: the access log line`, () => logged.test(router.proc.output()), 10_000);
    client.destroy();
    const status = Number(logged.exec(router.proc.output())?.[1]);
    // the counters move when the request is recorded, which is when the access log line is written
    return { status, metrics: delta(before, await outcomeSamples(router)) };
  }

  test('every engine fault: the same access-log status, request and error counts, and passive-health failures', async () => {
    const differences: string[] = [];
    const seen: Record<string, string> = {};
    for (const kase of Object.keys(FAULTS)) {
      const outcomes = [];
      for (const { name, router } of routers)
        outcomes.push({ name, ...(await run(router, MODEL, kase, `${kase}-${name.replace(/\W/g, '')}`)) });
      const [fast, node] = outcomes as [(typeof outcomes)[0], (typeof outcomes)[0]];
      seen[kase] = `${fast.status} ${JSON.stringify(fast.metrics)}`;
      if (fast.status !== node.status || JSON.stringify(fast.metrics) !== JSON.stringify(node.metrics))
        differences.push(
          `${kase}: fast path ${fast.status} ${JSON.stringify(fast.metrics)} | node:http ${node.status} ${JSON.stringify(node.metrics)}`,
        );
      // an engine failure is never a client that left
      if (fast.status === 499 || node.status === 499) differences.push(`${kase}: reported as a client that left (499)`);
    }
    // refused: the engine was ready and is gone now; each router's first request finds out
    await doomed.close();
    const refused = [];
    for (const { name, router } of routers) refused.push(await run(router, 'refused', 'any', `refused-${name.replace(/\W/g, '')}`));
    if (JSON.stringify(refused[0]) !== JSON.stringify(refused[1]))
      differences.push(`refused: fast path ${JSON.stringify(refused[0])} | node:http ${JSON.stringify(refused[1])}`);
    seen.refused = JSON.stringify(refused[0]);
    assert.deepEqual(differences, [], `outcomes per case (fast path): ${JSON.stringify(seen, null, 1)}`);
  });
});
