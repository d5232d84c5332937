// Inference requests: which paths they are, the checks every one passes (body, model, phase, faults,
// x-sim-status), then the answer: generated, embedded, echoed after a delay, or tokenized at once.
import { sglangAdapter } from './lora-sglang.js';
import type http from 'node:http';
import type { EngineContext } from './context.js';
import { answerLater, generate, newId } from './generation.js';
import { BodyError, readJsonRequest, sendJson } from './http-io.js';
import { echoBody, embeddingsBody, errorBody, modelNotFound, type GenerationApi } from './openai.js';
import { resetSocket } from './request-stats.js';
import { loadingError } from './status.js';
import { fillerText, outputBudget, promptTokens } from './tokens.js';
import { AUDIO_PATHS, answerAudio, readMultipart } from './audio.js';

const GENERATION_PATHS: ReadonlyMap<string, GenerationApi> = new Map([
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completion'],
]);
/** Paths answered by echoBody after a slot and a delay: they take batch slots like real requests do. */
const ECHO_GENERATION_PATHS = new Set(['/v1/responses', '/v1/messages']);
const ECHO_POOLING_PATHS = new Set(['/v1/rerank', '/rerank', '/v1/score', '/score']);
/** Tokenizer-only paths: answered at once, no batch slot. */
const TOKENIZER_PATHS = new Set(['/tokenize', '/detokenize']);
export const INFERENCE_PATHS: ReadonlySet<string> = new Set([
  ...GENERATION_PATHS.keys(),
  '/v1/embeddings',
  ...ECHO_GENERATION_PATHS,
  ...ECHO_POOLING_PATHS,
  ...TOKENIZER_PATHS,
  ...AUDIO_PATHS,
]);

/** Answers a POST to one of INFERENCE_PATHS; counted in the stats from arrival to its end. */
export async function answerInference(
  engine: EngineContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
): Promise<void> {
  engine.requests.counters.received++;
  const exchange = engine.requests.track(res);
  if (engine.fault().mode === 'hang') return;
  let body: Record<string, unknown>;
  let raw: Buffer;
  let fileBytes = 0;
  try {
    if (AUDIO_PATHS.has(path)) {
      // multipart/form-data: the fields are the body; the file is counted as it streams by
      const form = await readMultipart(req);
      body = { ...form.fields, ...(form.fields.stream !== undefined ? { stream: form.fields.stream === 'true' } : {}) };
      raw = form.raw ?? Buffer.alloc(0);
      fileBytes = form.fileBytes;
      engine.requests.record(path, req.headers, raw, { sha256: form.sha256, bytes: form.bytes });
    } else {
      ({ body, raw } = await readJsonRequest(req));
      engine.requests.record(path, req.headers, raw);
    }
  } catch (err) {
    if (err instanceof BodyError && err.status === 499) return;
    const status = err instanceof BodyError ? err.status : 400;
    return sendJson(res, status, errorBody((err as Error).message, 'BadRequestError', status));
  }
  if (body.model !== undefined && typeof body.model !== 'string') {
    return sendJson(res, 400, errorBody('"model" must be a string.', 'BadRequestError', 400, 'model'));
  }
  // like vLLM, a request without a model goes to the first served name
  const model = (body.model as string | undefined) ?? (engine.models[0] as string);
  engine.requests.counters.byModel[model] = (engine.requests.counters.byModel[model] ?? 0) + 1;
  if (engine.phase() !== 'ready') return sendJson(res, 503, loadingError());
  if (engine.kind === 'sglang') {
    const named = sglangAdapter(model, engine.models, engine.lora, body.lora_path);
    if (!named.ok) return sendJson(res, named.status, named.body);
    if (named.adapter !== undefined) {
      exchange.adapter = named.adapter;
      engine.lora?.counted(named.adapter);
    }
  } else if (engine.lora?.has(model)) {
    exchange.adapter = model;
    engine.lora.counted(model);
  } else if (!engine.models.includes(model)) return sendJson(res, 404, modelNotFound(model));

  const fault = engine.fault();
  if (fault.mode === 'error500')
    return sendJson(res, 500, errorBody('Internal server error (simulated engine fault).', 'InternalServerError', 500));
  // a per-request failure, as an engine bug triggered by one client's input would give
  const forced = Number(req.headers['x-sim-status']);
  if (Number.isInteger(forced) && forced >= 400 && forced <= 599) {
    return sendJson(res, forced, errorBody(`Simulated failure for this request (x-sim-status ${forced}).`, 'InternalServerError', forced));
  }
  if (fault.mode === 'overloaded') {
    return sendJson(
      res,
      503,
      errorBody('The engine is overloaded: too many requests waiting; retry later.', 'ServiceUnavailableError', 503),
      { 'retry-after': '1' },
    );
  }
  if (AUDIO_PATHS.has(path)) return answerAudio(engine, res, exchange, path, body, model, fileBytes);
  const api = GENERATION_PATHS.get(path);
  const stream = api !== undefined && body.stream === true;
  if (fault.mode === 'reset-mid-stream' && !stream) return resetSocket(res, exchange);

  let prefilled = false;
  if (engine.pd && (api !== undefined || path === '/v1/responses')) {
    const plan = await engine.pd.serve(engine, { req, res, exchange, path, api, body, raw, model });
    if (plan === 'answered') return;
    prefilled = plan.prefilled;
  }
  if (api !== undefined) return generate(engine, res, exchange, api, body, model, stream, prefilled);
  const prompt = promptTokens(body);
  if (path === '/v1/embeddings') {
    return answerLater(engine, res, exchange, engine.timing.ttftMs, { finishReason: 'stop', prompt, generated: 0 }, () =>
      embeddingsBody(model, body.input, engine.embeddingDim, body.encoding_format, prompt, newId()),
    );
  }
  const budget = outputBudget(body, engine.outputTokens);
  const generates = ECHO_GENERATION_PATHS.has(path);
  const outputTokens = generates ? budget.tokens : 0;
  const build = (): object =>
    echoBody({
      path,
      model,
      body,
      promptTokens: prompt,
      outputText: fillerText(outputTokens),
      outputTokens,
      id: newId(),
      maxModelLen: engine.maxModelLen,
      ...(path === '/tokenize' ? { tokenIds: engine.tokenizer.encodeBody(body) } : {}),
    });
  if (TOKENIZER_PATHS.has(path)) return sendJson(res, 200, build());
  const delay = generates ? engine.timing.ttftMs + engine.timing.interTokenMs(engine.fault()) * (budget.tokens - 1) : engine.timing.ttftMs;
  answerLater(engine, res, exchange, delay, { finishReason: 'stop', prompt, generated: outputTokens }, build);
}
