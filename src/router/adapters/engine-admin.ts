// The engines' adapter admin calls over HTTP, as their kind serves them (engine-apis.ts: paths, what answers mean,
// where slots are told). The calls go to the endpoint's probe URL (the engine itself, not a routing sidecar in front
// of it).
import { Agent, request } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import type { EngineKind } from '../core/engine.js';
import type { Endpoint } from '../core/endpoint.js';
import type { MissingAdapterAnswer } from '../core/lora.js';
import type { TraceSpan } from '../core/trace.js';
import { ADAPTER, ENDPOINT, HTTP_REQUEST_METHOD, HTTP_RESPONSE_STATUS_CODE, OUTCOME, SPAN, URL_PATH } from '../tracing/attributes.js';
import { adapterApi, engineMessage, type AdapterApi, type AdminAnswer } from './engine-apis.js';

const MAX_ANSWER_BYTES = 64 * 1024;
/** SGLang's server info holds every server setting and per-rank state */
const MAX_INFO_BYTES = 1024 * 1024;

export interface EngineAdminOptions {
  /** --engine-kind: which admin API the engines serve */
  readonly kind: EngineKind;
  readonly apiKey: string | undefined;
  readonly tls?: EngineTls;
  /** a load may download weights: the engine has this long to answer (--response-timeout) */
  readonly timeoutMs: number;
}

/** What the adapter manager asks of engines (EngineAdmin over HTTP; tests give their own). */
export interface AdapterAdmin {
  /** `trace` (tracing on): the parent of the call's CLIENT span, whose context the engine gets */
  load(e: Endpoint, name: string, path: string, trace?: TraceSpan): Promise<AdminAnswer>;
  unload(e: Endpoint, name: string, trace?: TraceSpan): Promise<{ ok: boolean; detail: string }>;
  /** the adapter slots an engine tells only when asked (SGLang's server info); undefined: it does not, or /metrics does */
  slots?(e: Endpoint): Promise<number | undefined>;
  /** the `model` an inference request for `adapter` of `base` carries to the engine; without it, the adapter's name */
  requestModel?(base: string, adapter: string): string;
  /** how its engines answer a request for an adapter they do not hold; without it, vLLM's 404 */
  readonly missingAdapter?: MissingAdapterAnswer;
  close(): Promise<void>;
}

export class EngineAdmin implements AdapterAdmin {
  private readonly dispatcher: Agent;
  private readonly api: AdapterApi;

  constructor(private readonly opts: EngineAdminOptions) {
    this.api = adapterApi(opts.kind);
    this.dispatcher = new Agent({
      connections: 4,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      ...(opts.tls ? { connect: tlsConnectOptions(opts.tls) } : {}),
    });
  }

  async load(e: Endpoint, name: string, path: string, trace?: TraceSpan): Promise<AdminAnswer> {
    const { loadPath } = this.api;
    const span = trace?.child(SPAN.adapterLoad, 'client', callAttributes(e, loadPath, name));
    let answer: AdminAnswer;
    try {
      const { status, text } = await this.call(e, 'POST', loadPath, { lora_name: name, lora_path: path }, span);
      answer = { ...this.api.classifyLoad(status, text), status };
    } catch (err) {
      answer = { result: 'failed', detail: `${loadPath}: ${transportError(err)}` };
    }
    if (span !== undefined) {
      span.set(OUTCOME, answer.result);
      if (answer.result === 'failed') span.fail('adapter load failed');
      span.end();
    }
    return answer;
  }

  /** true when the engine no longer holds it; otherwise the reason */
  async unload(e: Endpoint, name: string, trace?: TraceSpan): Promise<{ ok: boolean; detail: string }> {
    const { unloadPath } = this.api;
    const span = trace?.child(SPAN.adapterUnload, 'client', callAttributes(e, unloadPath, name));
    let result: { ok: boolean; detail: string };
    try {
      const { status, text } = await this.call(e, 'POST', unloadPath, { lora_name: name }, span);
      result = { ok: this.api.unloadDone(status, text), detail: engineMessage(text) || `${unloadPath} answered ${status}` };
    } catch (err) {
      result = { ok: false, detail: `${unloadPath}: ${transportError(err)}` };
    }
    if (span !== undefined) {
      span.set(OUTCOME, result.ok ? 'unloaded' : 'failed');
      if (!result.ok) span.fail('adapter unload failed');
      span.end();
    }
    return result;
  }

  async slots(e: Endpoint): Promise<number | undefined> {
    for (const path of this.api.infoPaths) {
      try {
        const { status, text } = await this.call(e, 'GET', path);
        if (status === 404) continue;
        return status === 200 ? this.api.slotsOf(JSON.parse(text)) : undefined;
      } catch {
        return undefined;
      }
    }
    return undefined;
  }

  requestModel(base: string, adapter: string): string {
    return this.api.requestModel(base, adapter);
  }

  get missingAdapter(): MissingAdapterAnswer {
    return this.api.missingAdapter;
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy().catch(() => undefined);
  }

  private async call(
    e: Endpoint,
    method: 'GET' | 'POST',
    path: string,
    body?: object,
    span?: TraceSpan,
  ): Promise<{ status: number; text: string }> {
    const maxBytes = body ? MAX_ANSWER_BYTES : MAX_INFO_BYTES;
    const headers: Record<string, string> = body
      ? { 'content-type': 'application/json', accept: 'application/json' }
      : { accept: 'application/json' };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    if (span !== undefined) {
      const w3c = span.propagation();
      for (let i = 0; i + 1 < w3c.length; i += 2) headers[w3c[i] as string] = w3c[i + 1] as string;
    }
    const res = await request(e.probeUrl + path, {
      method,
      headers,
      ...(body ? { body: JSON.stringify(body) } : {}),
      dispatcher: this.dispatcher,
      headersTimeout: this.opts.timeoutMs,
      bodyTimeout: this.opts.timeoutMs,
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    span?.set(HTTP_RESPONSE_STATUS_CODE, res.statusCode);
    if (Number(res.headers['content-length'] ?? 0) > maxBytes) {
      await res.body.dump();
      return { status: res.statusCode, text: '' };
    }
    return { status: res.statusCode, text: await res.body.text() };
  }
}

function callAttributes(e: Endpoint, path: string, adapter: string): Record<string, string> {
  return { [ENDPOINT]: e.probeUrl, [HTTP_REQUEST_METHOD]: 'POST', [URL_PATH]: path, [ADAPTER]: adapter };
}

function transportError(err: unknown): string {
  const code = (err as { code?: string }).code ?? (err as Error).name;
  return `${code} (${(err as Error).message})`;
}
