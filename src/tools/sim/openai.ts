// Pure builders for the JSON bodies and SSE chunks a vLLM OpenAI server sends.

export const SSE_DONE = 'data: [DONE]\n\n';

/** One server-sent event carrying a JSON payload, the way vLLM frames every stream chunk. */
export function sseEvent(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export type GenerationApi = 'chat' | 'completion';

/** What every chunk and body of one generation shares. */
export interface Generation {
  readonly api: GenerationApi;
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

export function newGeneration(api: GenerationApi, model: string, id: string, nowMs = Date.now()): Generation {
  return { api, id: `${api === 'chat' ? 'chatcmpl' : 'cmpl'}-${id}`, created: Math.floor(nowMs / 1000), model };
}

function chunkHead(g: Generation): { id: string; object: string; created: number; model: string } {
  return { id: g.id, object: g.api === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: g.created, model: g.model };
}

/** The first chat chunk vLLM sends: the assistant role with empty content. */
export function roleChunk(g: Generation): object {
  return { ...chunkHead(g), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] };
}

/** One output token; the last one carries the finish reason. */
export function tokenChunk(g: Generation, text: string, finishReason: string | null): object {
  if (g.api === 'chat') {
    return { ...chunkHead(g), choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: finishReason }] };
  }
  return { ...chunkHead(g), choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null }] };
}

/** Sent after the last token when the request asked for stream_options.include_usage. */
export function usageChunk(g: Generation, u: Usage): object {
  return { ...chunkHead(g), choices: [], usage: u };
}

export function completionBody(g: Generation, text: string, finishReason: string, u: Usage): object {
  if (g.api === 'chat') {
    return {
      id: g.id,
      object: 'chat.completion',
      created: g.created,
      model: g.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: text, tool_calls: [] },
          logprobs: null,
          finish_reason: finishReason,
          stop_reason: null,
        },
      ],
      usage: u,
    };
  }
  return {
    id: g.id,
    object: 'text_completion',
    created: g.created,
    model: g.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null }],
    usage: u,
  };
}

/** The `input` of an embeddings request as separate items: a string, a token-id list, or a list of either. */
export function embeddingInputs(input: unknown): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return [];
  if (input.every((v) => typeof v === 'number')) return [input as number[]];
  return input.map((v) =>
    typeof v === 'string' ? v : Array.isArray(v) ? (v.filter((n) => typeof n === 'number') as number[]) : JSON.stringify(v),
  );
}

/** A unit vector that depends only on the input, so the same text always embeds the same way. */
export function embeddingVector(item: string | number[], dim: number): number[] {
  const text = typeof item === 'string' ? item : item.join(',');
  let seed = 2166136261;
  for (let i = 0; i < text.length; i++) seed = Math.imul(seed ^ text.charCodeAt(i), 16777619) >>> 0;
  const vector: number[] = [];
  let norm = 0;
  for (let i = 0; i < dim; i++) {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    seed >>>= 0;
    const v = seed / 0xffffffff - 0.5;
    vector.push(v);
    norm += v * v;
  }
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  return vector.map((v) => v * scale);
}

function base64Floats(vector: readonly number[]): string {
  return Buffer.from(new Float32Array(vector).buffer).toString('base64');
}

export function embeddingsBody(
  model: string,
  input: unknown,
  dim: number,
  encodingFormat: unknown,
  promptTokens: number,
  id: string,
  nowMs = Date.now(),
): object {
  const data = embeddingInputs(input).map((item, index) => {
    const vector = embeddingVector(item, dim);
    return { object: 'embedding', index, embedding: encodingFormat === 'base64' ? base64Floats(vector) : vector };
  });
  return {
    id: `embd-${id}`,
    object: 'list',
    created: Math.floor(nowMs / 1000),
    model,
    data,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0 },
  };
}

/** OpenAI-shaped error body, as vLLM answers it. */
export function errorBody(message: string, type: string, code: number, param: string | null = null): object {
  return { error: { message, type, param, code } };
}

export function modelNotFound(model: string): object {
  return errorBody(`The model \`${model}\` does not exist.`, 'NotFoundError', 404, 'model');
}

export interface EchoInput {
  readonly path: string;
  readonly model: string;
  readonly body: Record<string, unknown>;
  readonly promptTokens: number;
  readonly outputText: string;
  readonly outputTokens: number;
  readonly id: string;
  readonly maxModelLen: number;
  /** /tokenize: the prompt's token ids (the engine's tokenizer) */
  readonly tokenIds?: number[];
}

/** Small plausible answers for the other paths the router forwards; each echoes `model` and `path`. */
export function echoBody(e: EchoInput): object {
  const created = Math.floor(Date.now() / 1000);
  switch (e.path) {
    case '/v1/responses':
      return {
        id: `resp_${e.id}`,
        object: 'response',
        created_at: created,
        model: e.model,
        path: e.path,
        status: 'completed',
        output: [
          {
            type: 'message',
            id: `msg_${e.id}`,
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: e.outputText, annotations: [] }],
          },
        ],
        usage: { input_tokens: e.promptTokens, output_tokens: e.outputTokens, total_tokens: e.promptTokens + e.outputTokens },
      };
    case '/v1/messages':
      return {
        id: `msg_${e.id}`,
        type: 'message',
        role: 'assistant',
        model: e.model,
        path: e.path,
        content: [{ type: 'text', text: e.outputText }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: e.promptTokens, output_tokens: e.outputTokens },
      };
    case '/v1/rerank':
    case '/rerank': {
      const documents = Array.isArray(e.body.documents) ? e.body.documents : [];
      const results = documents.map((document, index) => ({
        index,
        document: typeof document === 'string' ? { text: document } : document,
        relevance_score: 1 / (index + 1),
      }));
      return { id: `rerank-${e.id}`, model: e.model, path: e.path, usage: { total_tokens: e.promptTokens }, results };
    }
    case '/v1/score':
    case '/score': {
      const seconds = Array.isArray(e.body.text_2) ? e.body.text_2 : [e.body.text_2];
      const data = seconds.map((_, index) => ({ index, object: 'score', score: 1 / (index + 2) }));
      return {
        id: `score-${e.id}`,
        object: 'list',
        created,
        model: e.model,
        path: e.path,
        data,
        usage: { prompt_tokens: e.promptTokens, total_tokens: e.promptTokens },
      };
    }
    case '/tokenize': {
      const tokens = e.tokenIds ?? Array.from({ length: e.promptTokens }, (_, i) => i + 1);
      return { model: e.model, path: e.path, count: tokens.length, max_model_len: e.maxModelLen, tokens, token_strs: null };
    }
    case '/detokenize':
      return { model: e.model, path: e.path, prompt: fillerTextOf(e.body.tokens) };
    default:
      return { object: 'sim.echo', model: e.model, path: e.path };
  }
}

function fillerTextOf(tokens: unknown): string {
  const count = Array.isArray(tokens) ? tokens.length : 0;
  return Array.from({ length: count }, (_, i) => `t${i}`).join(' ');
}
