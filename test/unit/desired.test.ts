import { test } from 'node:test';
import assert from 'node:assert/strict';
import { desiredState, type PodLike, type WorkloadLike } from '../../src/router/discovery/kubernetes/desired.js';

const opts = { port: 8000, scheme: 'http', modelLabel: 'model' } as const;
const ready = [{ type: 'Ready', status: 'True' }];

function pod(
  name: string,
  o: {
    ip?: string;
    conditions?: { type: string; status: string }[];
    deleting?: boolean;
    port?: string;
    scheme?: string;
    model?: string;
    phase?: string;
  },
): PodLike {
  return {
    metadata: {
      name,
      namespace: 'ns',
      labels: o.model ? { model: o.model } : {},
      annotations: { ...(o.port ? { 'llm-router/port': o.port } : {}), ...(o.scheme ? { 'llm-router/scheme': o.scheme } : {}) },
      ...(o.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    status: { podIP: o.ip, conditions: o.conditions ?? [], phase: o.phase ?? 'Running' },
  };
}

test('only pods with an IP and Ready=True are endpoints; terminating ones drain; the port annotation wins', () => {
  const d = desiredState(
    [
      pod('a', { ip: '10.0.0.1', conditions: ready, model: 'm' }),
      pod('b', {
        ip: '10.0.0.2',
        conditions: [
          { type: 'Ready', status: 'False' },
          { type: 'ContainersReady', status: 'True' },
        ],
        model: 'm',
      }),
      pod('c', { conditions: ready, model: 'm' }),
      pod('d', { ip: '10.0.0.4', conditions: ready, model: 'm', deleting: true }),
      pod('e', { ip: 'fd00::5', conditions: ready, model: 'm', port: '8200' }),
      pod('f', { ip: '10.0.0.6', conditions: ready }),
      pod('g', { ip: '10.0.0.7', conditions: ready, model: 'm', phase: 'Failed' }),
    ],
    [],
    opts,
  );
  assert.deepEqual(d.endpoints, [
    { id: 'ns/a', url: 'http://10.0.0.1:8000', models: ['m'] },
    { id: 'ns/d', url: 'http://10.0.0.4:8000', models: ['m'], draining: true },
    { id: 'ns/e', url: 'http://[fd00::5]:8200', models: ['m'] },
  ]);
  assert.deepEqual(d.unnamed, ['Pod/ns/f']);
});

test('workloads declare their models at any replica count, zero included', () => {
  const w = (kind: string, replicas: number | undefined, model: string): WorkloadLike => ({
    kind,
    metadata: { name: model, namespace: 'ns' },
    spec:
      kind === 'LeaderWorkerSet'
        ? { replicas, leaderWorkerTemplate: { workerTemplate: { metadata: { labels: { model } } } } }
        : { replicas, template: { metadata: { labels: { model } } } },
  });
  const d = desiredState([], [w('Deployment', 0, 'zero'), w('StatefulSet', 2, 'two'), w('LeaderWorkerSet', undefined, 'lws')], opts);
  assert.deepEqual(d.declarations, [
    { model: 'zero', replicasWanted: false },
    { model: 'two', replicasWanted: true },
    { model: 'lws', replicasWanted: true },
  ]);
});

test('the scheme is --k8s-engine-scheme unless the pod says llm-router/scheme: http or https', () => {
  const pods = [
    pod('a', { ip: '10.0.0.1', conditions: ready, model: 'm' }),
    pod('b', { ip: '10.0.0.2', conditions: ready, model: 'm', scheme: 'https' }),
    pod('c', { ip: '10.0.0.3', conditions: ready, model: 'm', scheme: ' HTTP ' }),
    pod('d', { ip: '10.0.0.4', conditions: ready, model: 'm', scheme: 'ftp' }),
  ];
  const urls = (scheme: 'http' | 'https'): string[] => desiredState(pods, [], { ...opts, scheme }).endpoints.map((e) => e.url);
  assert.deepEqual(urls('http'), ['http://10.0.0.1:8000', 'https://10.0.0.2:8000', 'http://10.0.0.3:8000', 'http://10.0.0.4:8000']);
  assert.deepEqual(urls('https'), ['https://10.0.0.1:8000', 'https://10.0.0.2:8000', 'http://10.0.0.3:8000', 'https://10.0.0.4:8000']);
});

test('P/D: llm-d.ai/role gives the role, llm-router/probe-port the probe URL, sglang.ai/bootstrap-port the bootstrap port', () => {
  const pdPod = (name: string, ip: string, labels: Record<string, string>, annotations: Record<string, string> = {}): PodLike => ({
    metadata: { name, namespace: 'ns', labels: { model: 'm', ...labels }, annotations },
    status: { podIP: ip, conditions: ready, phase: 'Running' },
  });
  const d = desiredState(
    [
      pdPod('p', '10.0.0.1', { 'llm-d.ai/role': 'prefill' }, { 'sglang.ai/bootstrap-port': '9001', 'llm-router/pd-protocol': 'sglang' }),
      pdPod('d', '10.0.0.2', { 'llm-d.ai/role': 'decode' }, { 'llm-router/probe-port': '8200', 'llm-router/port': '8000' }),
      pdPod('b', '10.0.0.3', { 'llm-d.ai/role': 'prefill-decode' }),
      pdPod('x', '10.0.0.4', { 'llm-d.ai/role': 'encode' }),
      pdPod('y', '10.0.0.5', {}, { 'llm-router/pd-protocol': 'nixl', 'llm-router/probe-port': 'eighty' }),
    ],
    [
      {
        kind: 'Deployment',
        metadata: { name: 'prefill', namespace: 'ns', annotations: { 'llm-router/pd-protocol': 'llm-d-sidecar' } },
        spec: { replicas: 0, template: { metadata: { labels: { model: 'm', 'llm-d.ai/role': 'prefill' } } } },
      },
      {
        kind: 'Deployment',
        metadata: { name: 'decode', namespace: 'ns' },
        spec: {
          replicas: 1,
          template: {
            metadata: { labels: { model: 'm', 'llm-d.ai/role': 'decode' }, annotations: { 'llm-router/pd-protocol': 'vllm-nixl' } },
          },
        },
      },
    ],
    opts,
  );
  assert.deepEqual(d.endpoints, [
    { id: 'ns/b', url: 'http://10.0.0.3:8000', models: ['m'] },
    { id: 'ns/d', url: 'http://10.0.0.2:8000', models: ['m'], role: 'decode', probeUrl: 'http://10.0.0.2:8200' },
    { id: 'ns/p', url: 'http://10.0.0.1:8000', models: ['m'], role: 'prefill', bootstrapPort: 9001, pdProtocol: 'sglang' },
    { id: 'ns/y', url: 'http://10.0.0.5:8000', models: ['m'] },
  ]);
  assert.deepEqual(d.declarations, [
    { model: 'm', replicasWanted: false, role: 'prefill', pdProtocol: 'llm-d-sidecar' },
    { model: 'm', replicasWanted: true, role: 'decode', pdProtocol: 'vllm-nixl' },
  ]);
  assert.deepEqual(
    d.invalid.map((i) => i.object),
    ['Pod/ns/x', 'Pod/ns/y'],
  );
  assert.match(d.invalid[0]?.why ?? '', /"encode" is not prefill, decode or prefill-decode; it is not routed to/);
  assert.match(d.invalid[1]?.why ?? '', /"nixl" is not vllm-nixl/);
});

test('kvaware: each pod publishes KV-cache events on the flag ports or its annotations, one per data-parallel rank', () => {
  const p = (annotations: Record<string, string>, ip = '10.1.0.7'): PodLike => ({
    metadata: { name: 'p', namespace: 'ns', labels: { model: 'm' }, annotations },
    status: { podIP: ip, conditions: ready, phase: 'Running' },
  });
  const kv = { ...opts, kvEvents: { port: 5557, replayPort: undefined } };
  assert.equal(desiredState([p({})], [], opts).endpoints[0]?.kvEvents, undefined, 'no event sources unless kvaware is in use');
  assert.deepEqual(desiredState([p({})], [], kv).endpoints[0]?.kvEvents, { eventsUrls: ['tcp://10.1.0.7:5557'], replayUrls: [undefined] });
  assert.deepEqual(
    desiredState(
      [
        p(
          { 'llm-router/kv-events-port': '6000', 'llm-router/kv-events-replay-port': '6100', 'llm-router/kv-events-dp-size': '2' },
          'fd00::7',
        ),
      ],
      [],
      kv,
    ).endpoints[0]?.kvEvents,
    { eventsUrls: ['tcp://[fd00::7]:6000', 'tcp://[fd00::7]:6001'], replayUrls: ['tcp://[fd00::7]:6100', 'tcp://[fd00::7]:6101'] },
  );
  // a nonsense rank count is one rank
  assert.equal(desiredState([p({ 'llm-router/kv-events-dp-size': '1e9' })], [], kv).endpoints[0]?.kvEvents?.eventsUrls.length, 1);
});

test('kvaware: llm-router/tokenizer names how the pod’s models are tokenized (engine, off, a Hub repo, an absolute path); anything else is reported and ignored', () => {
  const p = (annotations: Record<string, string>): PodLike => ({
    metadata: { name: 'p', namespace: 'ns', labels: { model: 'm' }, annotations },
    status: { podIP: '10.1.0.7', conditions: ready, phase: 'Running' },
  });
  const kv = { ...opts, kvEvents: { port: 5557, replayPort: undefined } };
  const tokenizerOf = (value: string, o: typeof opts | typeof kv = kv) => desiredState([p({ 'llm-router/tokenizer': value })], [], o);
  assert.equal(tokenizerOf('/models/llama/tokenizer').endpoints[0]?.tokenizer, '/models/llama/tokenizer');
  assert.equal(tokenizerOf(' engine ').endpoints[0]?.tokenizer, 'engine');
  assert.equal(tokenizerOf('off').endpoints[0]?.tokenizer, 'off');
  assert.equal(tokenizerOf('Qwen/Qwen3-8B').endpoints[0]?.tokenizer, 'Qwen/Qwen3-8B', 'org/name: a Hub repo');
  assert.equal(tokenizerOf('hf:gpt2@v1.0').endpoints[0]?.tokenizer, 'hf:gpt2@v1.0');
  assert.equal(tokenizerOf('/models/t', opts).endpoints[0]?.tokenizer, undefined, 'not read unless kvaware is in use');
  for (const bad of ['models/t/x', '/models/../etc', 'path:/x', '/a\nb', 'hf:', 'hf:a/b/c', 'hf:org/name@', 'auto']) {
    const d = tokenizerOf(bad);
    assert.equal(d.endpoints[0]?.tokenizer, undefined, bad);
    assert.equal(d.endpoints.length, 1, 'the pod is still routed to');
    assert.match(d.invalid[0]?.why ?? '', /llm-router\/tokenizer: .* (is|has) .*; the annotation is ignored/);
  }
});
