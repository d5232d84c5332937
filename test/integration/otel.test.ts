// Issue 26 checks: OpenTelemetry traces from client to engine. A real OTLP/gRPC receiver (test/support/otlp-receiver.ts,
// built from the OpenTelemetry protocol's .proto files) takes the router's spans; the simulators record the traceparent
// each call brought them (GET /_sim/traceparents).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort, startCli, stopAll } from '../support/process.js';
import { allReady, call, endpointState, FAST_PROBES, metric, setFault, startRouter, startSim, type Running } from '../support/router.js';
import {
  parseTraceparent,
  SPAN_KIND,
  spanStrings,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.js';
import { type SimHere, startSimHere, stopSimsHere } from '../support/sim-here.js';
import { eventually, until, within } from '../support/within.js';
import { testCa } from '../support/certs.js';
import { requireTool } from '../support/tools.js';
import type { RecordedTraceparent } from '../../src/tools/sim/types.js';

const MODEL = 'otel-model';
const SERVICE = 'router-under-test';
/**
 * The SDK stamps each span from the wall clock (ms) plus a monotonic offset taken at its start: two spans' times may
 * disagree by a millisecond or two, so orderings between spans are checked within this much
 */
const SLOP_NS = 3_000_000n;
/** spans leave in batches every 100 ms in these tests (the default is 1 s) */
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '100' };

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

function clientContext(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

function chatBody(content: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 4, ...extra });
}

async function traceparents(sim: { readonly url: string }): Promise<RecordedTraceparent[]> {
  return (await call(`${sim.url}/_sim/traceparents`)).json<{ traceparents: RecordedTraceparent[] }>().traceparents;
}

/** Waits for the spans of `traceId` until `done` says they are all there (the request span ends last but one batch). */
async function spansOf(receiver: OtlpReceiver, traceId: string, done: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
  return eventually(`the spans of trace ${traceId}`, () => receiver.spans.filter((s) => s.traceId === traceId), done, 15_000);
}

function one(spans: readonly ReceivedSpan[], name: string, what = name): ReceivedSpan {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one ${what} span: ${spans.map((s) => s.name).join(', ')}`);
  return found[0] as ReceivedSpan;
}

/** the simulator's own spans (sim --otel-endpoint) */
const SIM_SERVICE = 'llm-router-sim';

/** The router's SERVER span (not a simulator's). */
function serverSpan(spans: readonly ReceivedSpan[]): ReceivedSpan {
  const found = spans.filter((s) => s.kind === SPAN_KIND.server && s.resource['service.name'] !== SIM_SERVICE);
  assert.equal(found.length, 1, 'one SERVER span');
  return found[0] as ReceivedSpan;
}

describe('tracing: a request, its stages and the engine calls (kvaware: /tokenize too)', () => {
  let receiver: OtlpReceiver;
  let sim: Running;
  let simB: Running;
  let router: Running;
  /** a LoRA engine (in this process) */
  let loraSim: SimHere;
  /** the LoRA and failover tests' router (default routing, not kvaware): the two engines above and the LoRA engine */
  let plainRouter: Running;

  before(async () => {
    receiver = await startOtlpReceiver();
    // a second engine: kvaware tokenizes only where there is a choice to make. These two stay processes: their own
    // spans (`llm-router sim --otel-endpoint`) are part of what the tests read
    const simArgs = ['--model', MODEL, '--ttft-ms', '1', '--itl-ms', '1', '--otel-endpoint', receiver.address];
    [sim, simB, loraSim] = await Promise.all([
      startSim([...simArgs, '--id', 'sim-a']),
      startSim([...simArgs, '--id', 'sim-b']),
      startSimHere([
        '--model',
        'lbase',
        '--enable-lora',
        '--max-loras',
        '2',
        '--lora-load-delay-ms',
        '200',
        '--ttft-ms',
        '1',
        '--itl-ms',
        '1',
      ]),
    ]);
    [router, plainRouter] = await Promise.all([
      startRouter(
        [
          '--static-backends',
          `${sim.url},${simB.url}`,
          '--static-models',
          `${MODEL},${MODEL}`,
          '--routing-logic',
          'kvaware',
          '--otel-endpoint',
          receiver.address,
          '--otel-service-name',
          SERVICE,
          ...FAST_PROBES,
        ],
        FAST_EXPORT,
      ),
      startRouter(
        [
          '--static-backends',
          `${sim.url},${simB.url},${loraSim.url}`,
          '--static-models',
          `${MODEL},${MODEL},lbase`,
          '--lora-adapters',
          'sql@lbase=/adapters/sql',
          '--otel-endpoint',
          receiver.address,
          ...FAST_PROBES,
        ],
        FAST_EXPORT,
      ),
    ]);
    await Promise.all([allReady(router.url, 2), allReady(plainRouter.url, 3)]);
  });
  after(async () => {
    await Promise.all([stopAll(), stopSimsHere()]);
    await receiver?.stop();
  });

  test('the SERVER span continues the client span; stage spans under it; the engine gets the context of its own CLIENT span', async () => {
    const client = clientContext();
    const marker = `MARKER-${hex(8)}`;
    const res = await call(`${router.url}/v1/chat/completions`, {
      body: chatBody(`please repeat ${marker} back to me`),
      headers: { traceparent: client.traceparent, tracestate: 'vendor=opaque', authorization: 'Bearer secret-key-xyz' },
    });
    assert.equal(res.status, 200, res.text);
    // the router's spans, and the simulator's own SERVER span of the chat call (sim --otel-endpoint)
    const all = await spansOf(
      receiver,
      client.traceId,
      (s) =>
        s.some((x) => x.kind === SPAN_KIND.server && x.resource['service.name'] === SERVICE) &&
        s.some((x) => x.resource['service.name'] === SIM_SERVICE && x.name === 'POST /v1/chat/completions'),
    );
    const spans = all.filter((s) => s.resource['service.name'] !== SIM_SERVICE);
    for (const s of spans) assert.equal(s.resource['service.name'], SERVICE, `${s.name}: service.name`);

    const server = serverSpan(spans);
    assert.equal(server.parentSpanId, client.spanId, "the SERVER span's parent is the client's span");
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.attributes['http.request.method'], 'POST');
    assert.equal(server.attributes['http.route'], '/v1/chat/completions');
    assert.equal(server.attributes['http.response.status_code'], 200);
    assert.equal(server.attributes['server.address'], '127.0.0.1');
    assert.equal(server.attributes['gen_ai.request.model'], MODEL);
    assert.equal(server.attributes['llm_router.model'], MODEL);
    assert.equal(server.attributes['llm_router.stream'], false);
    assert.equal(server.attributes['llm_router.request_id'], res.headers['x-request-id']);

    // the stages that take time have spans; a catalog lookup does not (its answer is on the request's span)
    assert.equal(server.attributes['llm_router.model_state'], 'ready');
    const route = one(spans, 'llm_router.route');
    const engine = one(spans, 'llm_router.engine');
    const tokenize = one(spans, 'llm_router.tokenize');
    for (const stage of [route, engine]) assert.equal(stage.parentSpanId, server.spanId, `${stage.name} is under the SERVER span`);
    assert.equal(tokenize.parentSpanId, route.spanId, "/tokenize's span is under the route span");
    assert.equal(route.attributes['llm_router.routing.policy'], 'kvaware');
    assert.equal(typeof route.attributes['llm_router.kv.fallback'], 'string', 'no KV events here: kvaware says why it fell back');
    assert.equal(engine.kind, SPAN_KIND.client);
    const served = [sim, simB].find((x) => x.url === engine.attributes['llm_router.endpoint']);
    assert.ok(served, `the engine span names one of the two: ${String(engine.attributes['llm_router.endpoint'])}`);
    assert.equal(engine.attributes['llm_router.role'], 'both');
    assert.equal(engine.attributes['llm_router.attempt'], 1);
    assert.equal(engine.attributes['llm_router.outcome'], 'done');
    assert.equal(engine.attributes['http.response.status_code'], 200);
    assert.equal(typeof engine.attributes['llm_router.time_to_first_byte_ms'], 'number');
    assert.ok(
      server.startNs <= engine.startNs + SLOP_NS && engine.endNs <= server.endNs + SLOP_NS,
      'the engine call lies within the request',
    );

    // what the engine got: a traceparent of the same trace, its parent the router's CLIENT span, never the client's own
    const seen = [...(await traceparents(sim)), ...(await traceparents(simB))].filter(
      (t) => parseTraceparent(t.traceparent).traceId === client.traceId,
    );
    const chat = (await traceparents(served)).find(
      (t) => t.path === '/v1/chat/completions' && parseTraceparent(t.traceparent).traceId === client.traceId,
    );
    const tok = seen.find((t) => t.path === '/tokenize');
    assert.ok(chat && tok, `the engine saw the trace on both calls: ${JSON.stringify(seen)}`);
    assert.equal(parseTraceparent(chat.traceparent).spanId, engine.spanId);
    assert.equal(parseTraceparent(tok.traceparent).spanId, tokenize.spanId);
    const simSpan = all.find((x) => x.resource['service.name'] === SIM_SERVICE && x.name === 'POST /v1/chat/completions');
    assert.equal(simSpan?.parentSpanId, engine.spanId, "the engine's own span continues the router's CLIENT span");
    assert.equal(simSpan?.kind, SPAN_KIND.server);
    assert.equal(chat.tracestate, 'vendor=opaque', "the client's tracestate goes on with the trace");
    assert.ok(
      seen.every((t) => t.traceparent !== client.traceparent),
      "the client's traceparent is never forwarded as is",
    );

    // no prompt, no key anywhere in the spans
    const strings = spanStrings(all);
    assert.ok(!strings.some((s) => s.includes(marker)), 'the prompt appears in no attribute or event');
    assert.ok(!strings.some((s) => s.includes('secret-key-xyz')), 'no credential appears in the spans');
  });

  test('a request without traceparent starts a trace; a 404 is traced with its error code', async () => {
    const before = new Set(receiver.spans.map((s) => s.traceId));
    const res = await call(`${router.url}/v1/chat/completions`, { body: JSON.stringify({ model: 'no-such-model', messages: [] }) });
    assert.equal(res.status, 404);
    const server = await eventually(
      'a new root SERVER span',
      () => receiver.spans.find((s) => s.kind === SPAN_KIND.server && s.resource['service.name'] === SERVICE && !before.has(s.traceId)),
      (s) => s !== undefined,
      15_000,
    );
    assert.ok(server);
    assert.equal(server.parentSpanId, '');
    assert.equal(server.attributes['http.response.status_code'], 404);
    assert.equal(server.attributes['llm_router.error_code'], 'model_not_found');
    assert.equal(await metric(router.url, 'llm_router_otel_spans_dropped_total', { reason: 'export_failed' }), 0);
    assert.equal(await metric(router.url, 'llm_router_otel_spans_dropped_total', { reason: 'queue_full' }), 0);
  });

  test('a LoRA adapter loaded for a request: the load is a CLIENT span under the adapter span, its context on the load call', async () => {
    const client = clientContext();
    const res = await call(`${plainRouter.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'sql', messages: [{ role: 'user', content: 'select' }], max_tokens: 2 }),
      headers: { traceparent: client.traceparent },
    });
    assert.equal(res.status, 200, res.text);
    const spans = await spansOf(receiver, client.traceId, (s) => s.some((x) => x.kind === SPAN_KIND.server));
    const server = serverSpan(spans);
    const adapter = one(spans, 'llm_router.adapter');
    const load = one(spans, 'llm_router.lora.load');
    assert.equal(adapter.parentSpanId, server.spanId);
    assert.equal(load.parentSpanId, adapter.spanId);
    assert.equal(load.kind, SPAN_KIND.client);
    assert.equal(load.attributes['llm_router.adapter'], 'sql');
    assert.equal(load.attributes['llm_router.outcome'], 'loaded');
    assert.equal(adapter.attributes['llm_router.adapter.waited'], true);
    const loadMs = Number(load.endNs - load.startNs) / 1e6;
    assert.ok(loadMs >= 150, `the load span lasted ${loadMs} ms (the engine takes 200 ms)`);
    const onLoad = (await traceparents(loraSim)).find((t) => t.path === '/v1/load_lora_adapter');
    assert.ok(onLoad, 'the load call carried a traceparent');
    assert.equal(parseTraceparent(onLoad.traceparent).spanId, load.spanId);
  });

  test('a failover: one CLIENT span per attempt, numbered, each engine continuing its own, and a failover event', async (t) => {
    // the two engines of this describe, behind the router that is not kvaware: sim-a answers 503 for this test
    const [busy, good] = [sim, simB];
    // the engine's own 503 (back-pressure): retried on the other endpoint, and no mark against its health
    await setFault(busy.url, { mode: 'overloaded' });
    t.after(() => setFault(busy.url, { mode: 'none' }));
    const traces: string[] = [];
    for (let i = 0; i < 4; i++) {
      const client = clientContext();
      traces.push(client.traceId);
      const res = await call(`${plainRouter.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
        headers: { traceparent: client.traceparent },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['x-sim-engine'], 'sim-b');
    }
    const engines = await eventually(
      'a trace with two attempts',
      () =>
        traces
          .map((t) => receiver.spans.filter((s) => s.traceId === t && s.name === 'llm_router.engine'))
          .find((attempts) => attempts.length === 2),
      (attempts) => attempts !== undefined,
      15_000,
    );
    assert.ok(engines);
    const first = engines.find((s) => s.attributes['llm_router.attempt'] === 1);
    const second = engines.find((s) => s.attributes['llm_router.attempt'] === 2);
    assert.ok(first && second);
    assert.equal(first.attributes['llm_router.endpoint'], busy.url);
    assert.equal(first.attributes['llm_router.outcome'], 'retryable');
    assert.equal(first.attributes['llm_router.failure'], 'engine-busy');
    assert.equal(first.statusCode, 2, 'the failed attempt is an error');
    assert.equal(second.attributes['llm_router.endpoint'], good.url);
    assert.equal(second.attributes['llm_router.outcome'], 'done');
    assert.equal(first.parentSpanId, second.parentSpanId);
    const traceId = first.traceId;
    const server = await eventually(
      'the request span',
      () => receiver.spans.find((s) => s.traceId === traceId && s.kind === SPAN_KIND.server && s.resource['service.name'] !== SIM_SERVICE),
      (x) => x !== undefined,
      15_000,
    );
    assert.equal(server?.spanId, first.parentSpanId);
    const failover = server?.events.find((e) => e.name === 'failover');
    assert.equal(failover?.attributes.from, busy.url);
    assert.equal(failover?.attributes.to, good.url);
    const onBusy = (await traceparents(busy)).find((t) => parseTraceparent(t.traceparent).traceId === traceId);
    const onGood = (await traceparents(good)).find((t) => parseTraceparent(t.traceparent).traceId === traceId);
    assert.equal(onBusy && parseTraceparent(onBusy.traceparent).spanId, first.spanId);
    assert.equal(onGood && parseTraceparent(onGood.traceparent).spanId, second.spanId);
  });

  test('a client that is not sampled: the engine gets its trace, unsampled, and nothing is exported', async () => {
    const traceId = hex(16);
    const res = await call(`${router.url}/v1/chat/completions`, {
      body: chatBody('hi'),
      headers: { traceparent: `00-${traceId}-${hex(8)}-00` },
    });
    assert.equal(res.status, 200);
    // either engine may have been asked (/tokenize) and have served it
    const seen = [...(await traceparents(sim)), ...(await traceparents(simB))].filter(
      (t) => parseTraceparent(t.traceparent).traceId === traceId,
    );
    assert.ok(seen.length > 0 && seen.every((t) => !parseTraceparent(t.traceparent).sampled), JSON.stringify(seen));
    // a sampled request after it: once its request span is exported, any span of the unsampled one would have been too
    const later = clientContext();
    assert.equal(
      (await call(`${router.url}/v1/chat/completions`, { body: chatBody('later'), headers: { traceparent: later.traceparent } })).status,
      200,
    );
    await spansOf(receiver, later.traceId, (s) => s.some((x) => x.kind === SPAN_KIND.server && x.resource['service.name'] === SERVICE));
    assert.equal(receiver.spans.filter((s) => s.traceId === traceId).length, 0);
  });
});

describe('tracing: a P/D request (vllm-nixl) and a held request', () => {
  let receiver: OtlpReceiver;
  let prefill: SimHere;
  let decode: SimHere;
  let pdRouter: Running;
  let loading: SimHere;

  before(async () => {
    receiver = await startOtlpReceiver();
    const pdArgs = ['--model', MODEL, '--pd-protocol', 'vllm-nixl', '--ttft-ms', '1', '--itl-ms', '1'];
    [prefill, decode, loading] = await Promise.all([
      startSimHere([...pdArgs, '--role', 'prefill', '--id', 'prefill-sim']),
      startSimHere([...pdArgs, '--role', 'decode', '--id', 'decode-sim']),
      // the held request's engine, of a model of its own: it loads until the held test ends its load (the router never
      // sees it ready before), so there is no race with a load timer
      startSimHere(['--model', 'cold-model', '--ttft-ms', '1', '--itl-ms', '1', '--fault', 'loading']),
    ]);
    // one router for both tests: P/D for MODEL, requests held up to 60 s for cold-model
    pdRouter = await startRouter(
      [
        '--static-backends',
        `${prefill.url},${decode.url},${loading.url}`,
        '--static-models',
        `${MODEL},${MODEL},cold-model`,
        '--static-backend-roles',
        'prefill,decode,both',
        '--pd-protocol',
        'vllm-nixl',
        '--cold-start-wait',
        '60',
        '--otel-endpoint',
        receiver.address,
        ...FAST_PROBES,
      ],
      FAST_EXPORT,
    );
    await Promise.all([endpointState(pdRouter.url, prefill.url, 'ready'), endpointState(pdRouter.url, decode.url, 'ready')]);
  });
  after(async () => {
    await Promise.all([stopAll(), stopSimsHere()]);
    await receiver?.stop();
  });

  test('prefill and decode calls are both children of the request span, each engine continuing its own', async () => {
    const client = clientContext();
    const res = await call(`${pdRouter.url}/v1/chat/completions`, {
      body: chatBody('a prompt for two engines', { stream: true }),
      headers: { traceparent: client.traceparent },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers['x-sim-engine'], 'decode-sim');
    const spans = await spansOf(receiver, client.traceId, (s) => s.some((x) => x.kind === SPAN_KIND.server));
    for (const s of spans) assert.equal(s.resource['service.name'], 'vllm-router', "vllm_router's default service name");
    const server = serverSpan(spans);
    assert.equal(server.parentSpanId, client.spanId);
    assert.equal(server.attributes['llm_router.stream'], true);
    const pre = one(spans, 'llm_router.engine.prefill');
    const dec = one(spans, 'llm_router.engine', 'decode attempt');
    assert.equal(pre.parentSpanId, server.spanId);
    assert.equal(dec.parentSpanId, server.spanId);
    assert.equal(pre.attributes['llm_router.role'], 'prefill');
    assert.equal(dec.attributes['llm_router.role'], 'decode');
    assert.equal(pre.attributes['llm_router.endpoint'], prefill.url);
    assert.equal(dec.attributes['llm_router.endpoint'], decode.url);
    assert.ok(pre.endNs <= dec.startNs + SLOP_NS, 'vllm-nixl: the decode call follows the prefill answer');
    assert.equal(server.attributes['llm_router.pd.protocol'], 'vllm-nixl');

    const onPrefill = (await traceparents(prefill)).find((t) => parseTraceparent(t.traceparent).traceId === client.traceId);
    const onDecode = (await traceparents(decode)).find(
      (t) => t.path === '/v1/chat/completions' && parseTraceparent(t.traceparent).traceId === client.traceId,
    );
    assert.ok(onPrefill && onDecode);
    assert.equal(parseTraceparent(onPrefill.traceparent).spanId, pre.spanId);
    assert.equal(parseTraceparent(onDecode.traceparent).spanId, dec.spanId);
  });

  test('a held request: the hold span covers the wait for the engine to load', async () => {
    // the engine loads (--fault loading) until the test ends its load, once the router holds the request
    const client = clientContext();
    const started = Date.now();
    const answer = call(`${pdRouter.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'cold-model', messages: [{ role: 'user', content: 'wake up' }], max_tokens: 2 }),
      headers: { traceparent: client.traceparent },
      timeoutMs: 60_000,
    });
    await until(
      'the request held',
      async () =>
        (await call(`${pdRouter.adminUrl}/demand`)).json<{ models: Record<string, { held: number }> }>().models['cold-model']?.held === 1,
    );
    const loadedAt = Date.now();
    await setFault(loading.url, { mode: 'none' });
    const res = await answer;
    const waitedMs = Date.now() - started;
    assert.equal(res.status, 200, res.text);
    const spans = await spansOf(receiver, client.traceId, (s) => s.some((x) => x.kind === SPAN_KIND.server));
    const server = serverSpan(spans);
    const hold = one(spans, 'llm_router.hold');
    const engine = one(spans, 'llm_router.engine');
    assert.equal(hold.parentSpanId, server.spanId);
    assert.equal(hold.attributes['llm_router.model_state'], 'loading');
    assert.equal(hold.attributes['llm_router.hold.outcome'], 'ready');
    assert.equal(hold.attributes['llm_router.model_state_after'], 'ready');
    // the hold began while the engine was loading and ended once it was ready: it covers the wait
    const holdStartMs = Number(hold.startNs / 1_000_000n);
    const holdEndMs = Number(hold.endNs / 1_000_000n);
    assert.ok(holdStartMs < loadedAt, `the hold began (${holdStartMs}) before the engine was ready (${loadedAt})`);
    // two processes' clocks: the span's (the router's time origin plus its monotonic clock) and Date.now() here can
    // differ by a few ms; the hold ends at least a probe after the load ended, so 50 ms of slack keeps the check's sense
    assert.ok(holdEndMs >= loadedAt - 50, `the hold ended (${holdEndMs}) once the engine was ready (${loadedAt})`);
    assert.ok(holdEndMs - holdStartMs <= waitedMs, `the hold lies within the request (${waitedMs} ms)`);
    assert.ok(hold.endNs <= engine.startNs + SLOP_NS, 'the engine is called once the hold is over');
  });
});

describe('tracing: TLS to the collector, a collector that is down, --workers', () => {
  /** one engine for every router of this describe (each test starts its own router and collector) */
  let sim: SimHere;

  before(async () => {
    sim = await startSimHere(['--model', MODEL, '--ttft-ms', '1', '--itl-ms', '1']);
  });
  after(() => Promise.all([stopAll(), stopSimsHere()]));

  test('--otel-secure talks TLS to a receiver whose certificate the router trusts (OTEL_EXPORTER_OTLP_CERTIFICATE)', {
    skip: requireTool('openssl'),
  }, async () => {
    const ca = testCa('otel-ca-');
    const cert = ca.sign('collector', '127.0.0.1', 'subjectAltName=IP:127.0.0.1');
    const receiver = await startOtlpReceiver({ tls: { cert: cert.cert, key: cert.key } });
    try {
      const router = await startRouter(
        ['--static-backends', sim.url, '--static-models', MODEL, '--otel-endpoint', receiver.address, '--otel-secure', ...FAST_PROBES],
        { ...FAST_EXPORT, OTEL_EXPORTER_OTLP_CERTIFICATE: ca.caFile },
      );
      await allReady(router.url, 1);
      const client = clientContext();
      const res = await call(`${router.url}/v1/chat/completions`, { body: chatBody('tls'), headers: { traceparent: client.traceparent } });
      assert.equal(res.status, 200);
      const spans = await spansOf(receiver, client.traceId, (s) => s.some((x) => x.kind === SPAN_KIND.server));
      assert.equal(serverSpan(spans).parentSpanId, client.spanId);
      await router.stop();
    } finally {
      await receiver.stop();
      ca.remove();
    }
  });

  test('an http://HOST:PORT/v1/traces endpoint is OTLP over HTTP/protobuf', async () => {
    const posts: { path: string; type: string; body: Buffer }[] = [];
    const collector = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        posts.push({ path: req.url ?? '', type: String(req.headers['content-type']), body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        res.end();
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    try {
      const port = (collector.address() as AddressInfo).port;
      const router = await startRouter(
        [
          '--static-backends',
          sim.url,
          '--static-models',
          MODEL,
          '--otel-endpoint',
          `http://127.0.0.1:${port}/v1/traces`,
          '--otel-service-name',
          'router-over-http',
          ...FAST_PROBES,
        ],
        FAST_EXPORT,
      );
      await allReady(router.url, 1);
      const client = clientContext();
      assert.equal(
        (await call(`${router.url}/v1/chat/completions`, { body: chatBody('h'), headers: { traceparent: client.traceparent } })).status,
        200,
      );
      const post = await eventually(
        'a protobuf export naming the trace',
        () => posts.find((p) => p.body.includes(Buffer.from(client.traceId, 'hex'))),
        (p) => p !== undefined,
        15_000,
      );
      assert.ok(post);
      assert.equal(post.path, '/v1/traces');
      assert.equal(post.type, 'application/x-protobuf');
      assert.ok(post.body.includes(Buffer.from('router-over-http')), 'the service name is in the export');
      await router.stop();
    } finally {
      collector.close();
    }
  });

  test('stopping flushes the spans still queued', async () => {
    const receiver = await startOtlpReceiver();
    try {
      // batches every 60 s: only the shutdown's flush can send this request's spans in time
      const router = await startRouter(
        ['--static-backends', sim.url, '--static-models', MODEL, '--otel-endpoint', receiver.address, ...FAST_PROBES],
        { OTEL_BSP_SCHEDULE_DELAY: '60000' },
      );
      await allReady(router.url, 1);
      const client = clientContext();
      assert.equal(
        (await call(`${router.url}/v1/chat/completions`, { body: chatBody('bye'), headers: { traceparent: client.traceparent } })).status,
        200,
      );
      assert.equal(receiver.spans.filter((s) => s.traceId === client.traceId).length, 0, 'nothing exported before the stop');
      assert.equal(await within(20_000, 'the router stopping', router.stop()), 0);
      const spans = receiver.spans.filter((s) => s.traceId === client.traceId);
      assert.equal(serverSpan(spans).parentSpanId, client.spanId, 'the request span was exported by the stop');
    } finally {
      await receiver.stop();
    }
  });

  test('a collector that is down: requests are answered as always, the drop counter rises', async () => {
    const down = await freePort();
    const router = await startRouter(
      ['--static-backends', sim.url, '--static-models', MODEL, '--otel-endpoint', `127.0.0.1:${down}`, ...FAST_PROBES],
      FAST_EXPORT,
    );
    await allReady(router.url, 1);
    const statuses = await within(
      15_000,
      '20 requests with the collector down',
      Promise.all(
        Array.from({ length: 20 }, () => call(`${router.url}/v1/chat/completions`, { body: chatBody('x') }).then((r) => r.status)),
      ),
    );
    assert.deepEqual(new Set(statuses), new Set([200]));
    await eventually(
      'spans counted as dropped',
      () => metric(router.url, 'llm_router_otel_spans_dropped_total', { reason: 'export_failed' }),
      (n) => n > 0,
      20_000,
    );
    // stopping does not hang on the collector: pending spans are given up within the shutdown time
    const code = await within(20_000, 'the router stopping with its collector down', router.stop());
    assert.equal(code, 0);
  });

  test('llm-router demo passes --otel-endpoint and --otel-service-name through to its router', { timeout: 60_000 }, async () => {
    const receiver = await startOtlpReceiver();
    try {
      const demo = startCli(
        ['demo', '--port', '0', '--log-level', 'warn', '--otel-endpoint', receiver.address, '--otel-service-name', 'demo-router'],
        FAST_EXPORT,
      );
      await demo.waitForOutput('Press Ctrl-C', 40_000);
      const base = /llm-router demo is up at (http:\/\/127\.0\.0\.1:\d+)/.exec(demo.output())?.[1];
      assert.ok(base, demo.output());
      const client = clientContext();
      const res = await call(`${base}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'demo-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
        headers: { traceparent: client.traceparent },
      });
      assert.equal(res.status, 200, res.text);
      const spans = await spansOf(receiver, client.traceId, (x) => x.some((y) => y.kind === SPAN_KIND.server));
      assert.equal(serverSpan(spans).resource['service.name'], 'demo-router');
      await demo.stop('SIGINT');
    } finally {
      await receiver.stop();
    }
  });

  test('--workers: each worker exports as an instance of its own', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const router = await startRouter(
        ['--static-backends', sim.url, '--static-models', MODEL, '--workers', '2', '--otel-endpoint', receiver.address, ...FAST_PROBES],
        FAST_EXPORT,
      );
      await until('two workers listening', () => router.proc.output().split('llm-router listening').length - 1 === 2);
      await allReady(router.url, 1);
      for (let i = 0; i < 12; i++)
        assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chatBody('w'), newConnection: true })).status, 200);
      const instances = await eventually(
        'server spans from two instances',
        () => [...new Set(receiver.spans.filter((s) => s.kind === SPAN_KIND.server).map((s) => String(s.resource['service.instance.id'])))],
        (ids) => ids.length >= 2,
        15_000,
      );
      assert.equal(instances.length, 2);
      await router.stop();
    } finally {
      await receiver.stop();
    }
  });
});
