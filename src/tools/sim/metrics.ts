// Prometheus text exposition with the metric names the real engines use, so load-signal readers can be tested.
import type { EngineKind } from '../../router/core/engine.js';

export interface MetricsSnapshot {
  readonly running: number;
  readonly waiting: number;
  /** the share of the KV pool's blocks the running sequences hold (vllm:kv_cache_usage_perc, sglang:token_usage) */
  readonly kvUsage: number;
  readonly successByReason: Readonly<Record<string, number>>;
  readonly promptTokens: number;
  readonly generationTokens: number;
  /** prompt tokens looked up in the prefix cache, and those found (vLLM counts both in tokens) */
  readonly prefixCacheQueries?: number;
  readonly prefixCacheHits?: number;
  /** vllm:cache_config_info: tokens per block and the cache's size in blocks */
  readonly cacheConfig?: { readonly blockSize: number; readonly numGpuBlocks: number };
  /** --enable-lora: vllm:lora_requests_info */
  readonly lora?: { metricLines(): string[] };
}

export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function num(n: number): string {
  return Number.isInteger(n) ? `${n}.0` : String(n);
}

function family(lines: string[], name: string, type: 'gauge' | 'counter', help: string, samples: Array<[string, number]>): void {
  lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  for (const [labels, value] of samples) lines.push(`${name}{${labels}} ${num(value)}`);
}

/**
 * Like vLLM with several served names, the series carry one model_name label: the first served name.
 */
export function renderMetrics(kind: EngineKind, modelName: string, s: MetricsSnapshot): string {
  const model = `model_name="${escapeLabel(modelName)}"`;
  const usage = s.kvUsage;
  const lines: string[] = [];
  if (kind === 'sglang') {
    family(lines, 'sglang:num_running_reqs', 'gauge', 'The number of running requests.', [[model, s.running]]);
    family(lines, 'sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.', [[model, s.waiting]]);
    family(lines, 'sglang:token_usage', 'gauge', 'The token usage.', [[model, usage]]);
    family(lines, 'sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', [[model, s.promptTokens]]);
    family(lines, 'sglang:generation_tokens_total', 'counter', 'Number of generation tokens processed.', [[model, s.generationTokens]]);
    return lines.join('\n') + '\n';
  }
  family(lines, 'vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', [[model, s.running]]);
  family(lines, 'vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', [[model, s.waiting]]);
  family(lines, 'vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', [[model, usage]]);
  const reasons = Object.entries(s.successByReason);
  family(
    lines,
    'vllm:request_success_total',
    'counter',
    'Count of successfully processed requests.',
    (reasons.length > 0 ? reasons : [['stop', 0] as [string, number]]).map(([reason, n]) => [
      `finished_reason="${escapeLabel(reason)}",${model}`,
      n,
    ]),
  );
  family(lines, 'vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', [[model, s.promptTokens]]);
  family(lines, 'vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', [[model, s.generationTokens]]);
  family(lines, 'vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', [
    [model, s.prefixCacheQueries ?? 0],
  ]);
  family(lines, 'vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', [
    [model, s.prefixCacheHits ?? 0],
  ]);
  if (s.cacheConfig) {
    family(lines, 'vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig', [
      [cacheConfigLabels(s.cacheConfig.blockSize, s.cacheConfig.numGpuBlocks), 1],
    ]);
  }
  if (s.lora) lines.push(...s.lora.metricLines());
  if (kind === 'tgi') {
    lines.push('# TYPE tgi_queue_size gauge', `tgi_queue_size ${num(s.waiting)}`);
    lines.push('# TYPE tgi_batch_current_size gauge', `tgi_batch_current_size ${num(s.running)}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * vLLM's labels: every CacheConfig field as Python's str() of it (so True, None), then engine (the engine index). The
 * simulator's cache is the whole GPU pool: num_gpu_blocks is its capacity, prefix caching on unless that is 0.
 */
function cacheConfigLabels(blockSize: number, numGpuBlocks: number): string {
  const labels: Array<[string, string]> = [
    ['block_size', String(blockSize)],
    ['gpu_memory_utilization', '0.9'],
    ['swap_space', '4'],
    ['cache_dtype', 'auto'],
    ['is_attention_free', 'False'],
    ['num_gpu_blocks_override', 'None'],
    ['sliding_window', 'None'],
    ['enable_prefix_caching', numGpuBlocks > 0 ? 'True' : 'False'],
    ['prefix_caching_hash_algo', 'sha256'],
    ['cpu_offload_gb', '0'],
    ['calculate_kv_scales', 'False'],
    ['num_gpu_blocks', String(numGpuBlocks)],
    ['num_cpu_blocks', 'None'],
    ['engine', '0'],
  ];
  return labels.map(([k, v]) => `${k}="${v}"`).join(',');
}
