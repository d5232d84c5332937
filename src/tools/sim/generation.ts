// Answers paced in time: each holds a batch slot, then sends one JSON body after its delay,
// or (chat and text completions with stream: true) one SSE token chunk after TTFT and one per inter-token gap.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type http from 'node:http';
import type { EngineContext } from './context.js';
import { DEFAULT_RESET_AFTER_CHUNKS } from './faults.js';
import { sendJson } from './http-io.js';
import {
  SSE_DONE,
  completionBody,
  newGeneration,
  roleChunk,
  sseEvent,
  tokenChunk,
  usage,
  usageChunk,
  type GenerationApi,
} from './openai.js';
import type { KvDemand, SlotLease } from './queue.js';
import { resetSocket, type Exchange, type SuccessRecord } from './request-stats.js';
import { fillerText, fillerToken, generationStart, outputBudget, promptTokens } from './tokens.js';

export function newId(): string {
  return randomUUID().replace(/-/g, '');
}

/**
 * A batch slot for the request with room for its KV cache (`demand`), and for its adapter when it names one
 * (--enable-lora).
 */
function takeSlot(engine: EngineContext, exchange: Exchange, start: () => void, demand: KvDemand): SlotLease {
  return engine.lora ? engine.lora.admit(engine.queue, exchange.adapter, start, demand) : engine.queue.admit(start, demand);
}

/**
 * Holds a batch slot for delayMs (computed when the slot is granted), then answers with one JSON body. Its KV cache
 * holds the prompt from the start and the generated tokens as they come, evenly over the delay.
 */
export function answerLater(
  engine: EngineContext,
  res: http.ServerResponse,
  exchange: Exchange,
  delayMs: number | (() => number),
  record: SuccessRecord,
  build: () => object,
  /** how the answer is sent: JSON unless told (the audio routes' text and stream formats) */
  send: (res: http.ServerResponse, answer: object) => void = (r, answer) => sendJson(r, 200, answer),
): void {
  let timer: NodeJS.Timeout | undefined;
  let startedAt = 0;
  let delay = 0;
  const held = (): number => {
    const done = delay > 0 ? Math.min(1, (performance.now() - startedAt) / delay) : 1;
    return record.prompt + Math.floor(record.generated * done);
  };
  const lease = takeSlot(
    engine,
    exchange,
    () => {
      startedAt = performance.now();
      delay = typeof delayMs === 'number' ? delayMs : delayMs();
      timer = setTimeout(() => {
        lease.release();
        engine.requests.recordSuccess(record);
        send(res, build());
      }, delay);
    },
    { tokens: record.prompt + record.generated, held },
  );
  exchange.cleanup.push(() => {
    clearTimeout(timer);
    lease.release();
  });
}

/**
 * Chat and text completions: one token after TTFT, then one per ITL; streamed as SSE or sent as one body. A prompt
 * `prefilled` by a prefill engine (P/D) costs only the base TTFT: its KV cache arrived instead of being computed.
 */
export function generate(
  engine: EngineContext,
  res: http.ServerResponse,
  exchange: Exchange,
  api: GenerationApi,
  body: Record<string, unknown>,
  model: string,
  stream: boolean,
  prefilled = false,
): void {
  const ttft = (): number => (prefilled ? engine.timing.ttftMs : engine.timing.prefillTtft(body, exchange.adapter));
  // a continuation (continue_final_message, a prompt ending in the filler text) goes on where its text so far ends
  const start = generationStart(api, body);
  const budget = outputBudget(body, engine.outputTokens, start);
  const prompt = promptTokens(body);
  const generation = newGeneration(api, model, newId());
  const streamOptions = body.stream_options as { include_usage?: unknown } | null | undefined;
  const includeUsage = stream && typeof streamOptions === 'object' && streamOptions !== null && streamOptions.include_usage === true;
  const fault = engine.fault();
  const resetAfter = fault.mode === 'reset-mid-stream' ? (fault.afterChunks ?? DEFAULT_RESET_AFTER_CHUNKS) : undefined;
  if (stream) {
    // like vLLM, headers go out as soon as the request is accepted, before the first token (even while queued)
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
  }
  if (!stream) {
    const delay = (): number => ttft() + engine.timing.interTokenMs(engine.fault()) * (budget.tokens - 1);
    const text = fillerText(budget.tokens, start);
    return answerLater(engine, res, exchange, delay, { finishReason: budget.finishReason, prompt, generated: budget.tokens }, () =>
      completionBody(generation, text, budget.finishReason, usage(prompt, budget.tokens)),
    );
  }
  let timer: NodeJS.Timeout | undefined;
  let sent = 0;
  const step = (): void => {
    const wait = sent > 0 ? engine.timing.decodeWait() : 0;
    if (wait > 0) {
      timer = setTimeout(step, wait);
      return;
    }
    for (;;) {
      if (resetAfter !== undefined && (sent >= resetAfter || sent === budget.tokens - 1)) {
        lease.release();
        return resetSocket(res, exchange);
      }
      const token = fillerToken(start + sent);
      sent++;
      const last = sent === budget.tokens;
      if (sent === 1 && api === 'chat') res.write(sseEvent(roleChunk(generation)));
      res.write(sseEvent(tokenChunk(generation, token, last ? budget.finishReason : null)));
      if (last) break;
      const delay = engine.timing.interTokenMs(engine.fault());
      if (delay > 0) {
        timer = setTimeout(step, delay);
        return;
      }
    }
    lease.release();
    engine.requests.recordSuccess({ finishReason: budget.finishReason, prompt, generated: budget.tokens });
    if (includeUsage) res.write(sseEvent(usageChunk(generation, usage(prompt, budget.tokens))));
    res.end(SSE_DONE);
  };
  const lease = takeSlot(
    engine,
    exchange,
    () => {
      timer = setTimeout(step, ttft());
    },
    { tokens: prompt + budget.tokens, held: () => prompt + sent },
  );
  exchange.cleanup.push(() => {
    clearTimeout(timer);
    lease.release();
  });
}
