import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  SSE_DONE,
  completionBody,
  echoBody,
  embeddingInputs,
  embeddingVector,
  embeddingsBody,
  modelNotFound,
  newGeneration,
  roleChunk,
  sseEvent,
  tokenChunk,
  usage,
  usageChunk,
} from '../../src/tools/sim/openai.js';
import { escapeLabel, renderMetrics } from '../../src/tools/sim/metrics.js';

test('SSE events are one data line of JSON followed by a blank line, and the stream ends with [DONE]', () => {
  assert.equal(sseEvent({ a: 1 }), 'data: {"a":1}\n\n');
  assert.equal(SSE_DONE, 'data: [DONE]\n\n');
});

test('chat chunks carry the role first, then content deltas, the finish reason on the last token, then usage', () => {
  const g = newGeneration('chat', 'm', 'abc', 1_700_000_000_000);
  assert.deepEqual(roleChunk(g), {
    id: 'chatcmpl-abc',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: 'm',
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
  });
  const last = tokenChunk(g, ' fox', 'length') as { choices: Array<{ delta: { content: string }; finish_reason: string | null }> };
  assert.equal(last.choices[0]?.delta.content, ' fox');
  assert.equal(last.choices[0]?.finish_reason, 'length');
  assert.deepEqual((usageChunk(g, usage(2, 3)) as { choices: unknown[]; usage: unknown }).choices, []);
  assert.deepEqual((usageChunk(g, usage(2, 3)) as { usage: unknown }).usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
});

test('text-completion chunks and bodies use the text_completion shape', () => {
  const g = newGeneration('completion', 'm', 'x');
  const chunk = tokenChunk(g, 'The', null) as { object: string; id: string; choices: Array<{ text: string }> };
  assert.equal(chunk.object, 'text_completion');
  assert.equal(chunk.id, 'cmpl-x');
  assert.equal(chunk.choices[0]?.text, 'The');
  const body = completionBody(g, 'The quick', 'stop', usage(1, 2)) as {
    choices: Array<{ text: string; finish_reason: string }>;
    usage: { total_tokens: number };
  };
  assert.equal(body.choices[0]?.text, 'The quick');
  assert.equal(body.usage.total_tokens, 3);
  const chat = completionBody(newGeneration('chat', 'm', 'y'), 'Hi', 'stop', usage(1, 1)) as {
    object: string;
    choices: Array<{ message: { role: string; content: string } }>;
  };
  assert.equal(chat.object, 'chat.completion');
  assert.deepEqual(chat.choices[0]?.message.content, 'Hi');
});

test('the unknown-model error is exactly what vLLM answers', () => {
  assert.deepEqual(modelNotFound('X'), {
    error: { message: 'The model `X` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
  });
});

test('embeddings: one unit vector per input item, the same for the same text, base64 on request', () => {
  assert.deepEqual(embeddingInputs('a'), ['a']);
  assert.deepEqual(embeddingInputs([1, 2, 3]), [[1, 2, 3]]);
  assert.deepEqual(embeddingInputs(['a', [4, 5]]), ['a', [4, 5]]);
  const v = embeddingVector('hello', 8);
  assert.equal(v.length, 8);
  assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-9);
  assert.deepEqual(embeddingVector('hello', 8), v);
  assert.notDeepEqual(embeddingVector('world', 8), v);
  const body = embeddingsBody('m', ['a', 'b'], 4, undefined, 2, 'id') as {
    object: string;
    data: Array<{ object: string; index: number; embedding: number[] }>;
    model: string;
  };
  assert.equal(body.object, 'list');
  assert.equal(body.model, 'm');
  assert.deepEqual(
    body.data.map((d) => [d.object, d.index, d.embedding.length]),
    [
      ['embedding', 0, 4],
      ['embedding', 1, 4],
    ],
  );
  const b64 = embeddingsBody('m', 'a', 4, 'base64', 1, 'id') as { data: Array<{ embedding: string }> };
  const decoded = new Float32Array(Uint8Array.from(Buffer.from(b64.data[0]?.embedding ?? '', 'base64')).buffer);
  assert.ok(Math.abs(Math.hypot(...decoded) - 1) < 1e-6);
  assert.equal(decoded.length, 4);
});

test('echo bodies name the model and the path they arrived on', () => {
  for (const path of ['/v1/responses', '/v1/messages', '/v1/rerank', '/rerank', '/v1/score', '/score', '/tokenize', '/detokenize']) {
    const body = echoBody({
      path,
      model: 'm',
      body: { documents: ['a'], text_2: ['b'], tokens: [1] },
      promptTokens: 2,
      outputText: 'The',
      outputTokens: 1,
      id: 'i',
      maxModelLen: 4096,
    }) as { model: string; path: string };
    assert.equal(body.model, 'm', path);
    assert.equal(body.path, path);
  }
});

test('metrics use vLLM names with a model_name label, and SGLang names for sglang', () => {
  const snapshot = { running: 3, waiting: 2, kvUsage: 0.75, successByReason: { stop: 5 }, promptTokens: 10, generationTokens: 20 };
  const vllm = renderMetrics('vllm', 'my"model', snapshot);
  assert.match(vllm, /^vllm:num_requests_running\{model_name="my\\"model"\} 3\.0$/m);
  assert.match(vllm, /^vllm:num_requests_waiting\{model_name="my\\"model"\} 2\.0$/m);
  assert.match(vllm, /^vllm:kv_cache_usage_perc\{model_name="my\\"model"\} 0\.75$/m);
  assert.match(vllm, /^vllm:request_success_total\{finished_reason="stop",model_name="my\\"model"\} 5\.0$/m);
  assert.match(vllm, /^# TYPE vllm:num_requests_waiting gauge$/m);
  const sglang = renderMetrics('sglang', 'm', snapshot);
  assert.match(sglang, /^sglang:num_running_reqs\{model_name="m"\} 3\.0$/m);
  assert.match(sglang, /^sglang:num_queue_reqs\{model_name="m"\} 2\.0$/m);
  assert.match(sglang, /^sglang:token_usage\{model_name="m"\} 0\.75$/m);
  assert.doesNotMatch(sglang, /vllm:/);
  assert.equal(escapeLabel('a\\b\nc'), 'a\\\\b\\nc');
});
