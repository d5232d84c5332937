import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { Endpoint } from '../../src/router/core/endpoint.js';

function endpoint(c: ModelCatalog, id: string): Endpoint {
  const e = c.endpoints().find((x) => x.id === id);
  assert.ok(e, `endpoint ${id} exists`);
  return e;
}

test('unknown, scaled-to-zero, loading, ready and unavailable come only from present declarations and states', () => {
  const c = new ModelCatalog();
  c.setDeclarations('known-models', ['sleeper']);
  c.setDeclarations('static', ['chat']);
  c.setEndpoints('static', [
    { id: 'a', url: 'http://a:8000', models: ['chat'] },
    { id: 'b', url: 'http://b:8000', models: ['chat'] },
  ]);
  assert.deepEqual(c.resolve('nope'), { kind: 'unknown', requested: 'nope' });
  assert.equal(c.resolve('sleeper').kind, 'unavailable');
  assert.equal((c.resolve('sleeper') as { state: string }).state, 'scaled-to-zero');
  assert.equal((c.resolve('chat') as { state: string }).state, 'loading');

  c.setState(endpoint(c, 'a'), 'ready');
  const r = c.resolve('chat');
  assert.equal(r.kind, 'routable');
  assert.deepEqual(r.kind === 'routable' && r.candidates.map((e) => e.id), ['a']);

  c.setState(endpoint(c, 'a'), 'failed');
  c.setState(endpoint(c, 'b'), 'failed');
  assert.equal((c.resolve('chat') as { state: string }).state, 'unavailable');
});

test('a catalog built in another order gives the same answers (no process history)', () => {
  const build = (order: number[]): ModelCatalog => {
    const c = new ModelCatalog();
    const steps = [
      () => c.setDeclarations('known-models', ['z']),
      () => c.setDeclarations('static', ['m']),
      () => c.setEndpoints('static', [{ id: 'e', url: 'http://e', models: ['m'] }]),
    ];
    for (const i of order) steps[i]!();
    return c;
  };
  const a = build([0, 1, 2]);
  const b = build([2, 1, 0]);
  for (const m of ['z', 'm', 'x']) assert.deepEqual(JSON.stringify(a.resolve(m)), JSON.stringify(b.resolve(m)));
  assert.deepEqual(a.models(), b.models());
});

test('aliases resolve to their target and the target counts as declared', () => {
  const c = new ModelCatalog();
  c.setAliases(new Map([['gpt-4o', 'llama']]));
  const r = c.resolve('gpt-4o');
  assert.equal(r.kind, 'unavailable');
  assert.equal(r.kind === 'unavailable' && r.model, 'llama');
  assert.equal(r.kind === 'unavailable' && r.state, 'scaled-to-zero');
  c.setEndpoints('s', [{ id: 'e', url: 'http://e', models: ['llama'] }]);
  c.setState(endpoint(c, 'e'), 'ready');
  const routed = c.resolve('gpt-4o');
  assert.equal(routed.kind === 'routable' && routed.aliased && routed.model, 'llama');
  assert.deepEqual(
    c.models().map((m) => [m.id, m.status, m.aliasOf ?? null]),
    [
      ['gpt-4o', 'ready', 'llama'],
      ['llama', 'ready', null],
    ],
  );
});

test('a model served by a live endpoint but declared nowhere is known', () => {
  const c = new ModelCatalog();
  c.setEndpoints('k8s', [{ id: 'p', url: 'http://p', models: ['served'] }]);
  assert.equal(c.resolve('served').kind, 'unavailable');
  c.setEndpoints('k8s', []);
  assert.equal(c.resolve('served').kind, 'unknown');
});

test('setEndpoints is level-triggered: gone endpoints leave, a changed URL is a new endpoint, draining is not routable', () => {
  const c = new ModelCatalog();
  const events: string[] = [];
  c.onChange((e) =>
    events.push(
      e.type === 'endpoint-state' ? `state:${e.endpoint.id}:${e.endpoint.state}` : `${e.type}${'endpoint' in e ? ':' + e.endpoint.id : ''}`,
    ),
  );
  c.setEndpoints('k8s', [{ id: 'p1', url: 'http://10.0.0.1:8000', models: ['m'] }]);
  c.setState(endpoint(c, 'p1'), 'ready');
  c.setEndpoints('k8s', [{ id: 'p1', url: 'http://10.0.0.1:8000', models: ['m'] }]);
  assert.equal(endpoint(c, 'p1').state, 'ready', 'an unchanged spec keeps its state');
  c.setEndpoints('k8s', [{ id: 'p1', url: 'http://10.0.0.2:8000', models: ['m'] }]);
  assert.equal(endpoint(c, 'p1').state, 'discovered', 'a new IP starts over');
  c.setState(endpoint(c, 'p1'), 'ready');
  c.setEndpoints('k8s', [{ id: 'p1', url: 'http://10.0.0.2:8000', models: ['m'], draining: true }]);
  assert.equal(endpoint(c, 'p1').state, 'draining');
  assert.equal(c.resolve('m').kind, 'unavailable');
  c.setState(endpoint(c, 'p1'), 'ready');
  assert.equal(endpoint(c, 'p1').state, 'draining', 'draining is final');
  c.setEndpoints('k8s', []);
  assert.equal(c.endpoints().length, 0);
  assert.deepEqual(events, [
    'endpoint-added:p1',
    'state:p1:ready',
    'endpoint-removed:p1',
    'endpoint-added:p1',
    'state:p1:ready',
    'state:p1:draining',
    'endpoint-removed:p1',
  ]);
});

test('setState on an endpoint that already left is ignored', () => {
  const c = new ModelCatalog();
  c.setEndpoints('s', [{ id: 'e', url: 'http://e', models: ['m'] }]);
  const e = endpoint(c, 'e');
  c.setEndpoints('s', []);
  c.setState(e, 'ready');
  assert.equal(c.resolve('m').kind, 'unknown');
});

test('a declaration that wants replicas makes a model with no live endpoint loading; draining-only follows it', () => {
  const c = new ModelCatalog();
  c.setDeclarations('kubernetes', [
    { model: 'up', replicasWanted: true },
    { model: 'zero', replicasWanted: false },
  ]);
  assert.equal((c.resolve('up') as { state: string }).state, 'loading');
  assert.equal((c.resolve('zero') as { state: string }).state, 'scaled-to-zero');
  // scaling down: the last pod is terminating and the workload wants none
  c.setEndpoints('kubernetes', [{ id: 'p', url: 'http://p', models: ['zero'], draining: true }]);
  assert.equal((c.resolve('zero') as { state: string }).state, 'scaled-to-zero');
  // rolling update: the old pod drains, the workload wants one, the new pod is not ready yet
  c.setEndpoints('kubernetes', [{ id: 'q', url: 'http://q', models: ['up'], draining: true }]);
  assert.equal((c.resolve('up') as { state: string }).state, 'loading');
  // another source declaring the same model without replicas does not cancel the wish
  c.setDeclarations('known-models', ['up']);
  assert.equal((c.resolve('up') as { state: string }).state, 'loading');
});
