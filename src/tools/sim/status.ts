// Health, model list, metrics and engine info: the signals readiness rules read, answered per engine kind
// (vLLM and OpenAI always healthy, SGLang's /get_model_info and server info, TGI's /info and its JSON 503 while loading).
import type http from 'node:http';
import type { EngineContext } from './context.js';
import { sendEmpty, sendJson } from './http-io.js';
import { renderMetrics } from './metrics.js';
import { errorBody } from './openai.js';
import { sglangLoraInfo } from './lora-sglang.js';

export function loadingError(): object {
  return errorBody('The model is still loading; try again later.', 'ServiceUnavailableError', 503);
}

/** Answers a GET or HEAD of a non-inference path; 404 for a path this engine kind does not serve. */
export function answerStatus(engine: EngineContext, res: http.ServerResponse, path: string): void {
  const ready = engine.phase() === 'ready';
  const first = engine.models[0] as string;
  switch (path) {
    case '/health':
      if (ready || engine.kind === 'vllm' || engine.kind === 'openai') return sendEmpty(res, 200);
      if (engine.kind === 'tgi') return sendJson(res, 503, { error: 'unhealthy', error_type: 'healthcheck' });
      return sendEmpty(res, 503);
    case '/v1/models':
      if (!ready) return sendJson(res, 503, loadingError());
      return sendJson(res, 200, {
        object: 'list',
        data: [
          ...engine.models.map((id) => ({
            id,
            object: 'model',
            created: engine.created,
            owned_by: engine.kind === 'openai' ? 'system' : engine.kind,
            root: engine.modelRoot ?? id,
            parent: null,
            max_model_len: engine.maxModelLen,
          })),
          ...(engine.lora?.modelCards(first, engine.created) ?? []),
        ],
      });
    case '/metrics': {
      const text = renderMetrics(engine.kind, first, {
        running: engine.queue.running,
        // requests waiting for room for their adapter in the batch wait too
        waiting: engine.queue.waiting + (engine.lora?.waiting ?? 0),
        // SGLang exports no adapter metric: its slots are in its server info
        ...(engine.lora && engine.kind !== 'sglang' ? { lora: engine.lora } : {}),
        kvUsage: engine.queue.kvUsage,
        successByReason: engine.requests.successByReason,
        promptTokens: engine.requests.promptTokenTotal,
        generationTokens: engine.requests.generationTokenTotal,
        prefixCacheQueries: engine.timing.prefixQueryTokens,
        prefixCacheHits: engine.timing.prefixHitTokens,
        cacheConfig: { blockSize: engine.kvCache.blockSize, numGpuBlocks: engine.queue.pool.blocks },
      });
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    case '/get_model_info':
      if (engine.kind !== 'sglang') break;
      if (!ready) return sendEmpty(res, 503);
      return sendJson(res, 200, { model_path: engine.modelRoot ?? first, tokenizer_path: engine.modelRoot ?? first, is_generation: true });
    case '/server_info':
    case '/get_server_info':
      if (engine.kind !== 'sglang') break;
      return sendJson(res, 200, {
        model_path: engine.modelRoot ?? first,
        served_model_name: first,
        ...sglangLoraInfo(engine.lora),
        version: 'sim',
      });
    case '/info':
      if (engine.kind !== 'tgi') break;
      if (!ready) return sendJson(res, 503, { error: 'unhealthy', error_type: 'healthcheck' });
      return sendJson(res, 200, {
        model_id: first,
        model_sha: null,
        model_dtype: 'float16',
        model_device_type: 'cuda',
        model_pipeline_tag: 'text-generation',
        max_concurrent_requests: engine.queue.capacity,
        max_best_of: 2,
        max_stop_sequences: 4,
        max_input_tokens: engine.maxModelLen - 1,
        max_total_tokens: engine.maxModelLen,
        validation_workers: 2,
        max_client_batch_size: 4,
        router: 'text-generation-router',
        version: 'sim',
      });
  }
  sendJson(res, 404, { detail: 'Not Found' });
}
