// The readiness sidecar: gives an engine pod the model-aware endpoint vLLM lacks. Contract llm-router-probe/v1
// (docs/operations.md): GET /ready is 200 only when the engine lists every expected model (and, with warm-up,
// has generated one token); GET /live is 200 while the engine answers at all. Every answer carries a JSON reason.
// The check is src/router/health/rules.ts probe(), the same one the router runs, so the kubelet and the router agree.
import http from 'node:http';
import { once } from 'node:events';
import { Agent } from 'undici';
import type { EngineKind } from '../../router/core/engine.js';
import { probe, warmup, type ProbeResult, type ProbeTarget } from '../../router/health/rules.js';
import type { Logger } from '../../router/util/log.js';

export const PROBE_CONTRACT = 'llm-router-probe/v1';

export interface ProbeSidecarOptions {
  readonly host: string;
  readonly port: number;
  readonly engineUrl: string;
  readonly models: readonly string[];
  readonly kind: EngineKind;
  readonly timeoutMs: number;
  readonly apiKey?: string | undefined;
  readonly warmup: boolean;
  readonly warmupTimeoutMs: number;
  readonly log?: Logger;
}

/** What /ready and /live report: `state` is one of the contract's states. */
export interface ProbeAnswer {
  readonly contract: typeof PROBE_CONTRACT;
  readonly ready: boolean;
  readonly live: boolean;
  readonly state: 'ready' | 'warming-up' | 'loading' | 'unreachable';
  readonly reason: string;
  readonly engine: string;
  readonly engineKind: EngineKind;
  readonly models: readonly string[];
  readonly checkedAt: string;
}

export interface ProbeSidecar {
  readonly url: string;
  readonly port: number;
  /** one check, as GET /ready would answer it */
  check(): Promise<ProbeAnswer>;
  close(): Promise<void>;
}

type Warm =
  | { readonly state: 'cold' }
  | { readonly state: 'warming' }
  | { readonly state: 'warm' }
  | { readonly state: 'failed'; readonly detail: string };

export async function startProbeSidecar(opts: ProbeSidecarOptions): Promise<ProbeSidecar> {
  const dispatcher = new Agent({ keepAliveTimeout: 10_000, connect: { timeout: opts.timeoutMs } });
  const target: ProbeTarget = { url: opts.engineUrl.replace(/\/+$/, ''), models: opts.models };
  const probeOpts = { kind: opts.kind, timeoutMs: opts.timeoutMs, apiKey: opts.apiKey, dispatcher };
  let warm: Warm = { state: opts.warmup ? 'cold' : 'warm' };
  let inFlight: Promise<ProbeAnswer> | undefined;
  let lastState: string | undefined;

  const startWarmup = (): void => {
    warm = { state: 'warming' };
    void warmup(target, opts.models[0] as string, { ...probeOpts, timeoutMs: opts.warmupTimeoutMs }).then((r) => {
      // a check in between may have seen the engine go away: only a warm-up still current may finish
      if (warm.state !== 'warming') return;
      warm = r.ok ? { state: 'warm' } : { state: 'failed', detail: r.detail };
    });
  };

  const answer = (result: ProbeResult): ProbeAnswer => {
    const make = (ready: boolean, live: boolean, state: ProbeAnswer['state'], reason: string): ProbeAnswer => ({
      contract: PROBE_CONTRACT,
      ready,
      live,
      state,
      reason,
      engine: target.url,
      engineKind: opts.kind,
      models: opts.models,
      checkedAt: new Date().toISOString(),
    });
    if (result.verdict !== 'ready') {
      // the engine restarted or dropped the model: the next ready engine is warmed up again
      if (opts.warmup) warm = { state: 'cold' };
      return make(false, result.verdict !== 'unreachable', result.verdict === 'unreachable' ? 'unreachable' : 'loading', result.detail);
    }
    if (warm.state === 'warm') return make(true, true, 'ready', result.detail);
    let reason = 'warm-up token in progress';
    if (warm.state === 'cold') reason = 'warm-up token requested';
    if (warm.state === 'failed') reason = `${warm.detail}; retrying`;
    if (warm.state !== 'warming') startWarmup();
    return make(false, true, 'warming-up', `${result.detail}; ${reason}`);
  };

  const check = (): Promise<ProbeAnswer> => {
    // kubelet probes (startup, readiness, liveness) arriving together share one check of the engine
    inFlight ??= probe(target, probeOpts)
      .then(answer)
      .then((a) => {
        if (a.state !== lastState) {
          opts.log?.info({ state: a.state, reason: a.reason }, 'engine readiness changed');
          lastState = a.state;
        }
        return a;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };

  const send = (res: http.ServerResponse, status: number, body: unknown, head: boolean): void => {
    const text = JSON.stringify(body) + '\n';
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'cache-control': 'no-store',
      'x-llm-router-probe-contract': PROBE_CONTRACT,
    });
    res.end(head ? undefined : text);
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const head = req.method === 'HEAD';
    if (path !== '/ready' && path !== '/live') {
      send(res, 404, { contract: PROBE_CONTRACT, error: `no ${path}; GET /ready or /live` }, head);
      return;
    }
    if (req.method !== 'GET' && !head) {
      res.setHeader('allow', 'GET, HEAD');
      send(res, 405, { contract: PROBE_CONTRACT, error: `${req.method} not allowed; use GET` }, false);
      return;
    }
    check().then(
      (a) => send(res, (path === '/ready' ? a.ready : a.live) ? 200 : 503, a, head),
      (err: unknown) =>
        send(res, 503, { contract: PROBE_CONTRACT, ready: false, live: false, state: 'unreachable', reason: String(err) }, head),
    );
  });
  server.keepAliveTimeout = 30_000;
  server.listen(opts.port, opts.host);
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  const shownHost = opts.host === '0.0.0.0' || opts.host === '::' ? '127.0.0.1' : opts.host;
  return {
    url: `http://${shownHost}:${port}`,
    port,
    check,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await dispatcher.close();
    },
  };
}
