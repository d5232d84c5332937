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
