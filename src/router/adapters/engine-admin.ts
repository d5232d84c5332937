// The engines' adapter admin calls, as vLLM serves them with VLLM_ALLOW_RUNTIME_LORA_UPDATING:
// POST /v1/load_lora_adapter {lora_name, lora_path} and POST /v1/unload_lora_adapter {lora_name}, and what their
// answers mean. The classification is pure (unit-tested); the calls go to the endpoint's probe URL (the engine itself,
// not a routing sidecar in front of it).
import { Agent, request } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import type { Endpoint } from '../core/endpoint.js';
import type { LoadResult } from '../core/lora.js';

export const LOAD_PATH = '/v1/load_lora_adapter';
export const UNLOAD_PATH = '/v1/unload_lora_adapter';

/** an engine's error text is cut to this many characters before it reaches a log or a client */
const MAX_DETAIL_CHARS = 300;
const MAX_ANSWER_BYTES = 64 * 1024;

export interface AdminAnswer {
  readonly result: LoadResult;
  /** the engine's own words (or the transport error) */
  readonly detail: string;
}

/** The message of an engine's error body: OpenAI's {error: {message}}, vLLM's older {message}, FastAPI's {detail}, or the text. */
export function engineMessage(text: string): string {
  let message = text;
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown };
    const m = typeof json.error === 'object' ? json.error?.message : (json.error ?? json.message ?? json.detail);
    if (typeof m === 'string') message = m;
    else if (m !== undefined) message = JSON.stringify(m);
  } catch {
    // not JSON: the text itself
  }
  message = message.replace(/\s+/g, ' ').trim();
  return message.length > MAX_DETAIL_CHARS ? `${message.slice(0, MAX_DETAIL_CHARS)}...` : message;
}

/**
 * A route the engine does not have: 404 or 405 with FastAPI's own {"detail": ...} (or no JSON at all). vLLM's errors
 * about an adapter (404 "No adapter found for ...") carry an error object instead, and are failures of the adapter.
 */
function routeMissing(status: number, text: string): boolean {
  if (status === 405) return true;
  if (status !== 404) return false;
  try {
    const json = JSON.parse(text) as Record<string, unknown>;
    return json.detail !== undefined && json.error === undefined && json.message === undefined;
  } catch {
    return true;
  }
}

/** What a load call's answer means: 200 loaded; 400 "already loaded" is a load too (another router made it). */
export function classifyLoad(status: number, text: string): AdminAnswer {
  const detail = engineMessage(text);
  if (status >= 200 && status < 300) return { result: 'loaded', detail };
  if (status === 400 && /already (been )?loaded/i.test(detail)) return { result: 'already-loaded', detail };
  if (routeMissing(status, text))
    return { result: 'unsupported', detail: `${LOAD_PATH} answered ${status}: the engine does not load adapters at run time` };
  return { result: 'failed', detail: detail || `${LOAD_PATH} answered ${status}` };
}

/** An unload call's answer: gone either way when 200, or 404 naming the adapter (the engine did not hold it). */
export function unloadDone(status: number, text: string): boolean {
  return (status >= 200 && status < 300) || (status === 404 && !routeMissing(status, text));
}

export interface EngineAdminOptions {
  readonly apiKey: string | undefined;
  readonly tls?: EngineTls;
  /** a load may download weights: the engine has this long to answer (--response-timeout) */
  readonly timeoutMs: number;
}

/** What the adapter manager asks of engines (EngineAdmin over HTTP; tests give their own). */
export interface AdapterAdmin {
  load(e: Endpoint, name: string, path: string): Promise<AdminAnswer>;
  unload(e: Endpoint, name: string): Promise<{ ok: boolean; detail: string }>;
  close(): Promise<void>;
}

export class EngineAdmin implements AdapterAdmin {
  private readonly dispatcher: Agent;

  constructor(private readonly opts: EngineAdminOptions) {
    this.dispatcher = new Agent({
      connections: 4,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      ...(opts.tls ? { connect: tlsConnectOptions(opts.tls) } : {}),
    });
  }

  async load(e: Endpoint, name: string, path: string): Promise<AdminAnswer> {
    try {
      const { status, text } = await this.post(e, LOAD_PATH, { lora_name: name, lora_path: path });
      return classifyLoad(status, text);
    } catch (err) {
      return { result: 'failed', detail: `${LOAD_PATH}: ${transportError(err)}` };
    }
  }

  /** true when the engine no longer holds it; otherwise the reason */
  async unload(e: Endpoint, name: string): Promise<{ ok: boolean; detail: string }> {
    try {
      const { status, text } = await this.post(e, UNLOAD_PATH, { lora_name: name });
      return { ok: unloadDone(status, text), detail: engineMessage(text) || `${UNLOAD_PATH} answered ${status}` };
    } catch (err) {
      return { ok: false, detail: `${UNLOAD_PATH}: ${transportError(err)}` };
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy().catch(() => undefined);
  }

  private async post(e: Endpoint, path: string, body: object): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    const res = await request(e.probeUrl + path, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      dispatcher: this.dispatcher,
      headersTimeout: this.opts.timeoutMs,
      bodyTimeout: this.opts.timeoutMs,
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    if (Number(res.headers['content-length'] ?? 0) > MAX_ANSWER_BYTES) {
      await res.body.dump();
      return { status: res.statusCode, text: '' };
    }
    return { status: res.statusCode, text: await res.body.text() };
  }
}

function transportError(err: unknown): string {
  const code = (err as { code?: string }).code ?? (err as Error).name;
  return `${code} (${(err as Error).message})`;
}
