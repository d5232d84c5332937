// The KV part of the operator's view: each endpoint's KV-cache event stream as the router follows it, and each model's
// kvaware decisions (by KV match or fallback, the mean matched share), counted in the process and forgotten with the model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { KvEndpointStatus } from '../../src/router/kv/subscriber.js';
import { KvDecisionTally, kvState, observeAll, type KvStatusReader } from '../../src/router/server/dashboard/kv-view.js';

/** Event streams by endpoint id; no tokenizer, no warning. */
function reader(streams: ReadonlyMap<string, KvEndpointStatus> = new Map()): KvStatusReader {
  return { statusOf: (id) => streams.get(id), tokenizerOf: () => undefined, warnings: () => [] };
}

function status(endpointId: string, fields: Partial<KvEndpointStatus> = {}): KvEndpointStatus {
  return {
    endpointId,
    connected: true,
    ranks: [
      { url: 'tcp://a:5557', replayUrl: undefined, connected: true, lastSeq: 4, dpRank: 0, lastEventAt: 1_000, joinReplay: undefined },
      {
        url: 'tcp://a:5558',
        replayUrl: undefined,
        connected: false,
        lastSeq: undefined,
        dpRank: 1,
        lastEventAt: undefined,
        joinReplay: undefined,
      },
    ],
    gaps: 2,
    replays: 3,
    rebuilds: 1,
    restarts: 0,
    malformed: 5,
    blocks: 42,
    lastEventAt: 1_000,
    lastError: undefined,
    ...fields,
  };
}

test('kvState: endpoints with an event stream, models with kvaware decisions; a gone model loses its count', () => {
  const c = new ModelCatalog();
  c.setDeclarations('static', ['m', 'other']);
  c.setEndpoints('static', [
    { id: 'a', url: 'http://a:8000', models: ['m'] },
    { id: 'b', url: 'http://b:8000', models: ['m'] },
  ]);
  const streams = new Map([['a', status('a', { connected: false, lastError: 'connect ECONNREFUSED' })]]);
  const tally = new KvDecisionTally();
  const seen: string[] = [];
  const observer = observeAll(tally, {
    matched: (model, matched, blocks) => seen.push(`${model} ${matched}/${blocks}`),
    fallback: (model, reason) => seen.push(`${model} ${reason}`),
  });
  observer.matched('m', 9, 10);
  observer.matched('m', 5, 10);
  observer.fallback('m', 'no-match');
  observer.fallback('m', 'no-match');
  observer.fallback('m', 'too-short');
  observer.fallback('gone', 'no-match');
  assert.deepEqual(
    seen,
    ['m 9/10', 'm 5/10', 'm no-match', 'm no-match', 'm too-short', 'gone no-match'],
    'both observers hear each decision',
  );

  const state = kvState(c, reader(streams), tally);
  assert.deepEqual(state.endpoints, [
    {
      id: 'a',
      url: 'http://a:8000',
      connected: false,
      ranks: 2,
      ranksConnected: 1,
      blocks: 42,
      lastEventAt: 1_000,
      gaps: 2,
      replays: 3,
      rebuilds: 1,
      restarts: 0,
      malformed: 5,
      lastError: 'connect ECONNREFUSED',
    },
  ]);
  assert.deepEqual(state.models, [
    { model: 'm', decisions: 5, matched: 2, fallbacks: { 'no-match': 2, 'too-short': 1 }, meanMatchedRatio: 0.7 },
  ]);
  assert.equal(JSON.stringify(state).includes('gone'), false, 'a model the catalog does not know is not shown');

  c.setDeclarations('static', ['other']);
  c.setEndpoints('static', []);
  assert.deepEqual(kvState(c, reader(streams), tally), { endpoints: [], models: [], tokenizers: [], warnings: [] });
  c.setDeclarations('static', ['m']);
  assert.deepEqual(kvState(c, reader(), tally).models, [], 'its count went with it');
});

test("kvState: each model's tokenizer (an alias is not listed again) and the warnings, in sentences", () => {
  const c = new ModelCatalog();
  c.setDeclarations('static', ['m', 'n']);
  c.setAliases(new Map([['a', 'm']]));
  const state = kvState(
    c,
    {
      statusOf: () => undefined,
      tokenizerOf: (model) =>
        model === 'm'
          ? { source: 'hub', name: 'Qwen/Qwen3-8B', revision: 'c'.repeat(40), namedBy: 'engines' }
          : { source: 'engine', namedBy: 'engines', reason: 'no engine of it has said which model it serves yet' },
      warnings: () => [{ kind: 'no-kv-events', model: 'n', message: 'no endpoint of n names a KV-cache event source' }],
    },
    new KvDecisionTally(),
  );
  assert.deepEqual(state.tokenizers, [
    { model: 'm', source: 'hub', name: 'Qwen/Qwen3-8B', revision: 'c'.repeat(40), namedBy: 'engines' },
    { model: 'n', source: 'engine', namedBy: 'engines', reason: 'no engine of it has said which model it serves yet' },
  ]);
  assert.deepEqual(state.warnings, ['no endpoint of n names a KV-cache event source']);
});
