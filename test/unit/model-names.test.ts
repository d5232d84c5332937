import { test } from 'node:test';
import assert from 'node:assert/strict';
import { declaredModelNames, namesFromArgs, portFromArgs, shellWords } from '../../src/router/discovery/kubernetes/model-names.js';

const tpl = (opts: { labels?: Record<string, string>; annotations?: Record<string, string>; command?: string[]; args?: string[] }) => ({
  metadata: { labels: opts.labels, annotations: opts.annotations },
  spec: {
    containers: [
      { name: 'sidecar', command: ['envoy'] },
      { name: 'engine', command: opts.command, args: opts.args },
    ],
  },
});

test('first rule that gives names wins: annotation, then label, then arguments', () => {
  const all = tpl({ annotations: { 'llm-router/models': 'a, b' }, labels: { model: 'lbl' }, args: ['--served-model-name', 'arg'] });
  assert.deepEqual(declaredModelNames(all, 'model'), { names: ['a', 'b'], source: 'annotation' });
  assert.deepEqual(declaredModelNames(tpl({ labels: { model: 'lbl' }, args: ['--served-model-name', 'arg'] }), 'model'), {
    names: ['lbl'],
    source: 'label',
  });
  assert.deepEqual(declaredModelNames(tpl({ labels: { app: 'lbl' }, args: ['--served-model-name', 'arg'] }), 'model'), {
    names: ['arg'],
    source: 'args',
  });
  assert.equal(declaredModelNames(tpl({}), 'model'), undefined);
  const onWorkload = declaredModelNames(tpl({ labels: { model: 'lbl' } }), 'model', { annotations: { 'llm-router/models': 'w' } });
  assert.deepEqual(onWorkload, { names: ['w'], source: 'annotation' });
});

test('engine arguments of vLLM, SGLang and TGI', () => {
  assert.deepEqual(namesFromArgs(['vllm', 'serve', 'meta-llama/Llama-3.1-8B', '--port', '8000']), ['meta-llama/Llama-3.1-8B']);
  assert.deepEqual(
    namesFromArgs(['/usr/local/bin/vllm', 'serve', 'Qwen/Qwen2.5-7B', '--served-model-name', 'qwen', 'qwen-7b', '--port', '8000']),
    ['qwen', 'qwen-7b'],
  );
  assert.deepEqual(namesFromArgs(['python3', '-m', 'vllm.entrypoints.openai.api_server', '--model=org/m']), ['org/m']);
  assert.deepEqual(namesFromArgs(['python3', '-m', 'sglang.launch_server', '--model-path', 'org/s', '--port', '30000']), ['org/s']);
  assert.deepEqual(namesFromArgs(['text-generation-launcher', '--model-id', 'org/t']), ['org/t']);
  assert.deepEqual(namesFromArgs(['--served-model-name=x', '--model', 'y']), ['x']);
  assert.deepEqual(namesFromArgs(['serve', 'not-vllm']), []);
});

test('shell scripts are split into words', () => {
  assert.deepEqual(shellWords(`vllm serve "org/My Model" --port 8000 && echo 'done'`), [
    'vllm',
    'serve',
    'org/My Model',
    '--port',
    '8000',
    'echo',
    'done',
  ]);
  const c = declaredModelNames(
    tpl({ command: ['/bin/sh', '-c'], args: ['pip install x; vllm serve org/m --served-model-name m1 --port 8200'] }),
    'model',
  );
  assert.deepEqual(c, { names: ['m1'], source: 'args' });
  assert.equal(portFromArgs(shellWords('vllm serve org/m --port 8200')), 8200);
  assert.equal(portFromArgs(['--port=abc']), undefined);
});
