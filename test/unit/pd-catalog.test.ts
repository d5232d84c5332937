// P/D model state (issue 15, item 4): which roles a model needs ready per protocol, what it says is missing, and the
// catalog's answer (decode-side candidates, ready prefill endpoints) from roles declared statically or discovered.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog, pdModelState } from '../../src/router/catalog/catalog.js';
import type { Endpoint, EndpointState } from '../../src/router/core/endpoint.js';
import { testEndpoint } from '../support/endpoints.js';
import type { EndpointRole, PdProtocol } from '../../src/router/core/pd.js';
import { RouterMetrics } from '../../src/router/metrics/metrics.js';
import type { ModelView } from '../../src/router/core/model.js';
import { explainModel } from '../../src/router/server/dashboard/explain.js';

function ep(role: EndpointRole, state: EndpointState, draining = false): Endpoint {
  return testEndpoint('http://e', {
    id: `${role}-${state}`,
    source: 's',
    role,
    state,
    everReady: state === 'ready',
    firstReadyAt: undefined,
    draining,
  });
}

const declared = { declared: true, wanted: { prefill: false, decode: false } };

test('pdModelState: which roles a protocol needs, and the state of the role that blocks', () => {
  const cases: [string, Endpoint[], PdProtocol, string, string[], typeof declared?][] = [
    ['both roles ready', [ep('prefill', 'ready'), ep('decode', 'ready')], 'sglang', 'ready', []],
    ['no prefill: vllm-nixl serves decode-only', [ep('prefill', 'failed'), ep('decode', 'ready')], 'vllm-nixl', 'ready', ['prefill']],
    ['no prefill: llm-d-sidecar serves decode-only', [ep('decode', 'ready')], 'llm-d-sidecar', 'ready', ['prefill']],
    ['no prefill: sglang cannot', [ep('prefill', 'failed'), ep('decode', 'ready')], 'sglang', 'unavailable', ['prefill']],
    ['sglang prefill still loading', [ep('prefill', 'serving-api'), ep('decode', 'ready')], 'sglang', 'loading', ['prefill']],
    ['no decode at all, declared', [ep('prefill', 'ready')], 'vllm-nixl', 'scaled-to-zero', ['decode']],
    [
      'no decode, but replicas wanted',
      [ep('prefill', 'ready')],
      'vllm-nixl',
      'loading',
      ['decode'],
      { declared: true, wanted: { prefill: false, decode: true } },
    ],
    ['a ready both endpoint serves whole requests', [ep('prefill', 'failed'), ep('both', 'ready')], 'sglang', 'ready', ['prefill']],
    ['a draining decode does not count', [ep('prefill', 'ready'), ep('decode', 'ready', true)], 'vllm-nixl', 'scaled-to-zero', ['decode']],
    ['the blocker furthest from serving names the state', [ep('prefill', 'discovered')], 'sglang', 'scaled-to-zero', ['prefill', 'decode']],
    [
      'failed decode beats loading prefill',
      [ep('prefill', 'discovered'), ep('decode', 'failed')],
      'sglang',
      'unavailable',
      ['prefill', 'decode'],
    ],
  ];
  for (const [what, endpoints, protocol, state, missing, decl] of cases) {
    assert.deepEqual(pdModelState(endpoints, decl ?? declared, protocol), { state, missing }, what);
  }
});

function ready(c: ModelCatalog, ...ids: string[]): void {
  for (const e of c.endpoints()) if (ids.includes(e.id)) c.setState(e, 'ready');
}

function staticPd(c: ModelCatalog, roles: EndpointRole[]): void {
  const specs = roles.map((role, i) => ({ id: `e${i}`, url: `http://10.0.0.${i}:8000`, models: ['m'], role }));
  c.setDeclarations(
    'static',
    specs.map((s) => ({ model: 'm', role: s.role })),
  );
  c.setEndpoints('static', specs);
}

test('a model with a prefill endpoint resolves to its decode side and its ready prefill endpoints', () => {
  const c = new ModelCatalog();
  staticPd(c, ['prefill', 'decode', 'both']);
  ready(c, 'e0', 'e1', 'e2');
  const r = c.resolve('m');
  assert.equal(r.kind, 'routable');
  if (r.kind !== 'routable') return;
  assert.deepEqual(
    r.candidates.map((e) => e.id),
    ['e1', 'e2'],
  );
  assert.equal(r.pd?.protocol, 'vllm-nixl');
  assert.deepEqual(
    r.pd?.prefill.map((e) => e.id),
    ['e0'],
  );
  assert.deepEqual(c.model('m')?.pd, {
    protocol: 'vllm-nixl',
    prefill: { ready: 1, total: 1 },
    decode: { ready: 2, total: 2 },
    missing: [],
  });
});

test('a model without a prefill endpoint or declaration is served as before, decode endpoints included', () => {
  const c = new ModelCatalog();
  staticPd(c, ['decode', 'both']);
  ready(c, 'e0', 'e1');
  const r = c.resolve('m');
  assert.equal(r.kind === 'routable' && r.pd, undefined);
  assert.equal(r.kind === 'routable' && r.candidates.length, 2);
  assert.equal(c.model('m')?.pd, undefined);
});

test('a prefill declaration alone makes the model P/D: sglang with no prefill is unavailable and says why', () => {
  const c = new ModelCatalog({ pdProtocol: 'sglang' });
  c.setDeclarations('kubernetes', [
    { model: 'm', role: 'prefill', replicasWanted: false },
    { model: 'm', role: 'decode', replicasWanted: true },
  ]);
  c.setEndpoints('kubernetes', [{ id: 'd', url: 'http://d', models: ['m'], role: 'decode' }]);
  ready(c, 'd');
  assert.deepEqual(c.resolve('m'), { kind: 'unavailable', requested: 'm', model: 'm', state: 'scaled-to-zero', missing: ['prefill'] });
  assert.deepEqual(c.model('m')?.pd?.missing, ['prefill']);
});

test('the workload annotation overrides --pd-protocol; sources that disagree are shown, the first in sort order wins', () => {
  const c = new ModelCatalog({ pdProtocol: 'vllm-nixl' });
  c.setDeclarations('kubernetes', [{ model: 'm', role: 'prefill', pdProtocol: 'sglang' }]);
  assert.equal(c.model('m')?.pd?.protocol, 'sglang');
  c.setEndpoints('kubernetes', [{ id: 'd', url: 'http://d', models: ['m'], role: 'decode', pdProtocol: 'llm-d-sidecar' }]);
  assert.equal(c.model('m')?.pd?.protocol, 'llm-d-sidecar');
  assert.deepEqual(c.model('m')?.pd?.conflictingProtocols, ['llm-d-sidecar', 'sglang']);
});

test('aliases of a P/D model resolve with its P/D route', () => {
  const c = new ModelCatalog();
  c.setAliases(new Map([['alias', 'm']]));
  staticPd(c, ['prefill', 'decode']);
  ready(c, 'e0', 'e1');
  const r = c.resolve('alias');
  assert.equal(r.kind === 'routable' && r.aliased && r.pd?.prefill.length, 1);
  assert.equal(c.model('alias')?.pd?.protocol, 'vllm-nixl');
});

test('a changed role or probe target is a new endpoint; the same spec keeps the endpoint and its state', () => {
  const c = new ModelCatalog();
  c.setEndpoints('k', [{ id: 'p', url: 'http://p:8000', models: ['m'], role: 'decode' }]);
  ready(c, 'p');
  const before = c.endpoints()[0];
  c.setEndpoints('k', [{ id: 'p', url: 'http://p:8000', models: ['m'], role: 'decode' }]);
  assert.equal(c.endpoints()[0], before);
  c.setEndpoints('k', [{ id: 'p', url: 'http://p:8000', models: ['m'], role: 'decode', probeUrl: 'http://p:8200' }]);
  assert.notEqual(c.endpoints()[0], before);
  assert.equal(c.endpoints()[0]?.state, 'discovered');
  assert.equal(c.endpoints()[0]?.probeUrl, 'http://p:8200');
  c.setEndpoints('k', [{ id: 'p', url: 'http://p:8000', models: ['m'], role: 'prefill', probeUrl: 'http://p:8200' }]);
  assert.equal(c.endpoints()[0]?.role, 'prefill');
});

test('P/D answers do not depend on the order the inputs arrived in', () => {
  const build = (order: number[]): ModelCatalog => {
    const c = new ModelCatalog({ pdProtocol: 'sglang' });
    const steps = [
      () => c.setDeclarations('k', [{ model: 'm', role: 'prefill', replicasWanted: true }]),
      () => c.setEndpoints('k', [{ id: 'd', url: 'http://d', models: ['m'], role: 'decode' }]),
      () => c.setDeclarations('static', ['m']),
    ];
    for (const i of order) steps[i]?.();
    return c;
  };
  const a = build([0, 1, 2]);
  const b = build([2, 1, 0]);
  assert.equal(JSON.stringify(a.resolve('m')), JSON.stringify(b.resolve('m')));
  assert.deepEqual(a.models(), b.models());
  assert.equal(a.model('m')?.status, 'loading');
});

test('P/D metrics: per role and per model, gone with the model (bounded label values)', async () => {
  const c = new ModelCatalog();
  const metrics = new RouterMetrics(c, { defaultMetrics: false });
  staticPd(c, ['prefill', 'decode']);
  ready(c, 'e0');
  metrics.pd.call('m', 'prefill', 0.01);
  metrics.pd.prefillFailed('m', 'connect');
  metrics.pd.decodeOnly('m', 'prefill-failed');
  let text = (await metrics.exposition()).body;
  assert.match(text, /^llm_router_pd_requests_total\{model="m",role="prefill"\} 1$/m);
  assert.match(text, /^llm_router_pd_request_duration_seconds_count\{model="m",role="prefill"\} 1$/m);
  assert.match(text, /^llm_router_pd_prefill_failures_total\{model="m",kind="connect"\} 1$/m);
  assert.match(text, /^llm_router_pd_decode_only_total\{model="m",reason="prefill-failed"\} 1$/m);
  assert.match(text, /^llm_router_model_role_ready_endpoints\{model="m",role="prefill"\} 1$/m);
  assert.match(text, /^llm_router_model_role_ready_endpoints\{model="m",role="decode"\} 0$/m);
  c.setDeclarations('static', []);
  c.setEndpoints('static', []);
  text = (await metrics.exposition()).body;
  assert.doesNotMatch(text, /model="m"/);
});

test("the operator's page explains a P/D model by the role that holds it back, or says it serves decode-only", () => {
  const c = new ModelCatalog({ pdProtocol: 'sglang' });
  staticPd(c, ['prefill', 'decode']);
  ready(c, 'e1');
  for (const e of c.endpoints()) if (e.id === 'e0') c.setState(e, 'failed', 'connection refused');
  const explain = (): string => explainModel(c.model('m') as ModelView, c.endpoints(), { held: 0, stalled: false });
  assert.equal(explain(), 'P/D (sglang), no ready prefill endpoint: every endpoint failed; http://10.0.0.0:8000: connection refused');
  const nixl = new ModelCatalog();
  staticPd(nixl, ['prefill', 'decode']);
  ready(nixl, 'e1');
  assert.match(
    explainModel(nixl.model('m') as ModelView, nixl.endpoints(), { held: 0, stalled: false }),
    /^1 of 2 endpoints ready; 1 coming up; P\/D \(vllm-nixl\), no ready prefill endpoint: decode-only$/,
  );
});
