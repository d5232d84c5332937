// The simulator as one half of a P/D pair (--role prefill|decode, --pd-protocol): it checks the protocol strictly,
// answers prefill requests with what the real engines return, and lets a decode request skip the prompt's compute
// only when a prefill engine really computed it (the KV cache is pulled from it, or received in a bootstrap room).
// A decode request without P/D fields computes the prompt itself, and is counted; malformed fields are a 400.
import { bracketHost } from '../../router/util/host.js';
import type http from 'node:http';
import type { EndpointRole, PdProtocol } from '../../router/core/pd.js';
import type { EngineContext } from './context.js';
import { answerLater, newId } from './generation.js';
import { sendJson } from './http-io.js';
import { completionBody, echoBody, errorBody, newGeneration, usage, type GenerationApi } from './openai.js';
import {
  checkNixlPrefill,
  MalformedPd,
  NIXL_PREFILL_PARAMS,
  readBootstrap,
  readNixlParams,
  readPrefillerHeader,
  type RemotePrefill,
} from './pd-checks.js';
import { peerPost, PrefillLedger, promptHash, type RoomOutcome } from './pd-peer.js';
import type { Exchange } from './request-stats.js';
import { fillerText, promptTokens } from './tokens.js';

/** How a decode request goes on: with its prompt computed elsewhere, or here. */
export type DecodePlan = { readonly prefilled: boolean } | 'answered';

export interface SimPdRequest {
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
  readonly exchange: Exchange;
  readonly path: string;
  /** chat or completion; undefined for /v1/responses */
  readonly api: GenerationApi | undefined;
  readonly body: Record<string, unknown>;
  readonly raw: Buffer;
  readonly model: string;
}

const ROOM_STATUS: Readonly<Record<RoomOutcome, number>> = { sent: 200, 'prefill-gone': 410, timeout: 504, 'other-prompt': 409 };

function hostInUrl(host: string): string {
  return host.startsWith('[') ? host : bracketHost(host);
}

export class SimPd {
  /** prefill role: prompts prefilled and held, and bootstrap rooms */
  readonly ledger = new PrefillLedger();

  constructor(
    readonly role: EndpointRole,
    readonly protocol: PdProtocol,
  ) {}

  /** Prefill engines answer the request here; decode engines say how generation goes on. */
  async serve(engine: EngineContext, r: SimPdRequest): Promise<DecodePlan> {
    try {
      if (this.role === 'prefill') {
        if (this.protocol === 'sglang') await this.prefillInRoom(engine, r);
        else this.prefillAndHold(engine, r);
        return 'answered';
      }
      if (this.protocol === 'sglang') return await this.decodeFromRoom(engine, r);
      return await this.decodeByPull(engine, r);
    } catch (err) {
      if (!(err instanceof MalformedPd)) throw err;
      engine.requests.counters.pd.malformed++;
      sendJson(r.res, 400, errorBody(err.message, 'BadRequestError', 400, 'kv_transfer_params'));
      return 'answered';
    }
  }

  /** POST /_sim/kv/pull on a prefill engine: a decode engine takes a prefilled prompt's KV cache. */
  pull(engine: EngineContext, body: Record<string, unknown>): number {
    if (this.role !== 'prefill' || this.protocol === 'sglang') return 404;
    const status = this.ledger.pull(String(body.request_id), String(body.prompt));
    if (status === 200) engine.requests.counters.pd.transferred++;
    return status;
  }

  /** POST /_sim/bootstrap/join on a prefill engine: a decode engine waits in its room until the KV cache is sent. */
  async join(engine: EngineContext, body: Record<string, unknown>): Promise<number> {
    if (this.role !== 'prefill' || this.protocol !== 'sglang') return 404;
    const id = String(body.room);
    const room = this.ledger.room(id);
    if (room.decodePrompt !== undefined) return 409;
    room.decodePrompt = String(body.prompt);
    room.join();
    const outcome = await room.done;
    if (outcome === 'sent') engine.requests.counters.pd.transferred++;
    return ROOM_STATUS[outcome];
  }

  /** The answer of a prefill request: one token, plus what the request's protocol returns. */
  private answerPrefill(engine: EngineContext, r: SimPdRequest, extra: object, onAnswer: () => void): void {
    const prompt = promptTokens(r.body);
    answerLater(
      engine,
      r.res,
      r.exchange,
      () => engine.timing.prefillTtft(r.body),
      { finishReason: 'length', prompt, generated: 1 },
      () => {
        onAnswer();
        engine.requests.counters.pd.prefilled++;
        const base =
          r.api === undefined
            ? echoBody({
                path: r.path,
                model: r.model,
                body: r.body,
                promptTokens: prompt,
                outputText: fillerText(1),
                outputTokens: 1,
                id: newId(),
                maxModelLen: engine.maxModelLen,
              })
            : completionBody(newGeneration(r.api, r.model, newId()), fillerText(1), 'length', usage(prompt, 1));
        return { ...base, ...extra };
      },
    );
  }

  /** vllm-nixl (and the prefill engine behind an llm-d sidecar): compute, then hold the KV cache for a decode engine to pull. */
  private prefillAndHold(engine: EngineContext, r: SimPdRequest): void {
    checkNixlPrefill(r.body, r.path);
    const requestId = newId();
    const blocks = Math.max(1, Math.ceil(promptTokens(r.body) / 16));
    const params = {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: Array.from({ length: blocks }, (_, i) => i),
      remote_engine_id: engine.id,
      remote_request_id: requestId,
      remote_host: engine.host,
      remote_port: engine.port,
      tp_size: 1,
    };
    this.answerPrefill(engine, r, { kv_transfer_params: params }, () => this.ledger.hold(requestId, promptHash(r.body)));
  }

  /** sglang: wait in the bootstrap room for the decode engine, compute, and send it the KV cache. */
  private async prefillInRoom(engine: EngineContext, r: SimPdRequest): Promise<void> {
    const bootstrap = readBootstrap(r.body, r.raw.toString('latin1'));
    if (!bootstrap) throw new MalformedPd('a prefill request needs bootstrap_host, bootstrap_port and bootstrap_room');
    const room = this.ledger.room(bootstrap.room);
    if (room.prefillPrompt !== undefined) throw new MalformedPd(`bootstrap_room ${bootstrap.room} is already in use: rooms must be unique`);
    room.prefillPrompt = promptHash(r.body);
    r.exchange.cleanup.push(() => this.ledger.close(bootstrap.room, room, 'prefill-gone'));
    const first = await Promise.race([room.joined.then(() => 'joined' as const), room.done]);
    if (r.res.destroyed) return;
    if (first !== 'joined') {
      sendJson(r.res, 500, errorBody(`no decode engine joined bootstrap room ${bootstrap.room}`, 'InternalServerError', 500));
      return;
    }
    if (room.decodePrompt !== room.prefillPrompt) {
      this.ledger.close(bootstrap.room, room, 'other-prompt');
      throw new MalformedPd(`the decode engine in bootstrap room ${bootstrap.room} was sent another prompt`);
    }
    this.answerPrefill(engine, r, {}, () => this.ledger.close(bootstrap.room, room, 'sent'));
  }

  private async decodeFromRoom(engine: EngineContext, r: SimPdRequest): Promise<DecodePlan> {
    const bootstrap = readBootstrap(r.body, r.raw.toString('latin1'));
    if (!bootstrap) return this.local(engine);
    const answer = await peerPost(
      `http://${hostInUrl(bootstrap.host)}:${bootstrap.port}/_sim/bootstrap/join`,
      { room: bootstrap.room, prompt: promptHash(r.body) },
      this.abortSignal(r.exchange),
    );
    if (r.res.destroyed) return 'answered';
    if (answer.status === 200) return this.remote(engine);
    engine.requests.counters.pd.transferFailed++;
    sendJson(
      r.res,
      500,
      errorBody(`KV transfer in bootstrap room ${bootstrap.room} failed (${answer.status || 'unreachable'})`, 'InternalServerError', 500),
    );
    return 'answered';
  }

  /** vllm-nixl: pull the KV cache the params point at. llm-d-sidecar: first run the prefill call the header names. */
  private async decodeByPull(engine: EngineContext, r: SimPdRequest): Promise<DecodePlan> {
    let params = readNixlParams(r.body.kv_transfer_params);
    if (this.protocol === 'llm-d-sidecar') {
      const prefiller = readPrefillerHeader(r.req.headers['x-prefiller-host-port']);
      if (prefiller) {
        const prefilled = await this.sidecarPrefill(r, prefiller);
        if (prefilled === 'answered') return 'answered';
        params = prefilled;
      }
    }
    if (!params) return this.local(engine);
    const pulled = await peerPost(
      `http://${hostInUrl(params.host)}:${params.port}/_sim/kv/pull`,
      { request_id: params.requestId, prompt: promptHash(r.body) },
      this.abortSignal(r.exchange),
    );
    if (r.res.destroyed) return 'answered';
    if (pulled.status === 200) return this.remote(engine);
    engine.requests.counters.pd.transferFailed++;
    return this.local(engine);
  }

  /** What llm-d's sidecar does: the NIXL prefill call; a 4xx goes back to the client, any other failure means decode-only. */
  private async sidecarPrefill(
    r: SimPdRequest,
    prefiller: { host: string; port: number },
  ): Promise<RemotePrefill | undefined | 'answered'> {
    const { stream: _s, stream_options: _o, min_tokens: _m, ...rest } = r.body;
    const limits =
      r.path === '/v1/responses'
        ? { max_output_tokens: 1 }
        : { max_tokens: 1, ...('max_completion_tokens' in rest ? { max_completion_tokens: 1 } : {}) };
    const requestId = r.req.headers['x-request-id'];
    const answer = await peerPost(
      `http://${prefiller.host}:${prefiller.port}${r.path}`,
      { ...rest, kv_transfer_params: NIXL_PREFILL_PARAMS, stream: false, ...limits },
      this.abortSignal(r.exchange),
      typeof requestId === 'string' ? { 'x-request-id': requestId } : {},
    );
    if (r.res.destroyed) return 'answered';
    if (answer.status >= 400 && answer.status <= 451) {
      sendJson(r.res, answer.status, answer.json ?? errorBody('the prefill engine refused the request', 'BadRequestError', answer.status));
      return 'answered';
    }
    if (answer.status < 200 || answer.status >= 300) return undefined;
    return readNixlParams((answer.json as { kv_transfer_params?: unknown } | undefined)?.kv_transfer_params);
  }

  private local(engine: EngineContext): DecodePlan {
    engine.requests.counters.pd.local++;
    return { prefilled: false };
  }

  private remote(engine: EngineContext): DecodePlan {
    engine.requests.counters.pd.remote++;
    return { prefilled: true };
  }

  /** Aborted when the request ends, e.g. its client leaves: a peer call made for it stops too. */
  private abortSignal(exchange: Exchange): AbortSignal {
    const controller = new AbortController();
    exchange.cleanup.push(() => controller.abort());
    return controller.signal;
  }
}
