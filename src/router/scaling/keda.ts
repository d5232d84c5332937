// KEDA external scaler (gRPC externalscaler.ExternalScaler): tells KEDA whether a model is in demand and how much,
// so a model at zero replicas wakes on the first request and stays up while requests are held or in flight.
// Every answer is about the whole system (every worker of every router replica), whichever process KEDA reaches.
import { bracketHost } from '../util/host.js';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { StartupError } from '../core/startup-error.js';
import type { Logger } from '../util/log.js';
import { isActive, load, type ModelTotals } from './demand-snapshot.js';

const PROTO = fileURLToPath(new URL('../../../proto/externalscaler.proto', import.meta.url));

/** The scaling metric's target per replica when the ScaledObject does not set targetValue. */
const DEFAULT_TARGET = 8;

export type ModelLookup =
  | { readonly kind: 'known'; readonly model: string }
  | { readonly kind: 'unknown' }
  /** discovery has not listed yet: "unknown" would be a guess */
  | { readonly kind: 'not-synced' };

export interface ScalerView {
  /** the canonical name of a requested model (aliases resolved) */
  lookup(model: string): ModelLookup;
  /** demand per model over every router process and replica */
  totals(): Promise<Readonly<Record<string, ModelTotals>>>;
  readonly graceMs: number;
  /** a call was answered with an error (the metric llm_router_keda_scaler_errors_total) */
  readonly onError?: (method: string, code: string) => void;
}

/** TLS for the scaler's port (PEM contents): with `ca`, clients must present a certificate it signed (mTLS). */
export interface KedaTls {
  readonly cert: string;
  readonly key: string;
  readonly ca?: string;
}

interface ScaledObjectRef {
  name?: string;
  namespace?: string;
  scalerMetadata?: Record<string, string>;
}

interface Scaled {
  readonly model: string;
  readonly target: number;
}

class ScalerError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

/** KEDA metric names must be DNS-label-like; model names may hold slashes and dots. */
export function metricNameFor(model: string): string {
  return `llm-router-${model
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')}`.slice(0, 63);
}

/** Pure: the target per replica from the trigger metadata; a value that is not a positive number is refused. */
export function parseTarget(meta: Readonly<Record<string, string>> | undefined): number {
  const raw = meta?.targetValue ?? meta?.target;
  if (raw === undefined || raw.trim() === '') return DEFAULT_TARGET;
  const n = Number(raw.trim());
  if (!Number.isFinite(n) || n <= 0)
    throw new ScalerError(grpc.status.INVALID_ARGUMENT, `targetValue ${JSON.stringify(raw)} must be a positive number`);
  return n;
}

export class KedaScaler {
  private readonly server = new grpc.Server();
  /** open StreamIsActive calls and the function that pushes a change to each */
  private readonly streams = new Map<
    grpc.ServerWritableStream<ScaledObjectRef, { result: boolean }>,
    (totals: Readonly<Record<string, ModelTotals>>) => void
  >();
  private timer: NodeJS.Timeout | undefined;
  port = 0;

  constructor(
    private readonly view: ScalerView,
    private readonly log: Logger,
    private readonly pushIntervalMs = 1_000,
  ) {
    const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: Number, defaults: true });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { externalscaler: { ExternalScaler: { service: grpc.ServiceDefinition } } };
    const unary =
      <Req, Res>(method: string, answer: (req: Req) => Promise<Res>) =>
      (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>): void => {
        answer(call.request).then(
          (res) => cb(null, res),
          (err: unknown) => cb(this.grpcError(method, err)),
        );
      };
    this.server.addService(pkg.externalscaler.ExternalScaler.service, {
      IsActive: unary('IsActive', async (ref: ScaledObjectRef) => {
        const s = this.scaled(ref);
        return { result: isActive((await this.view.totals())[s.model], this.view.graceMs) };
      }),
      StreamIsActive: (call: grpc.ServerWritableStream<ScaledObjectRef, { result: boolean }>) => {
        let s: Scaled;
        try {
          s = this.scaled(call.request);
        } catch (err) {
          // grpc-js sends an error status on a server stream through its 'error' event
          call.emit('error', this.grpcError('StreamIsActive', err));
          return;
        }
        let last: boolean | undefined;
        const push = (totals: Readonly<Record<string, ModelTotals>>): void => {
          const now = isActive(totals[s.model], this.view.graceMs);
          if (now !== last) {
            last = now;
            call.write({ result: now });
          }
        };
        this.streams.set(call, push);
        call.on('cancelled', () => this.streams.delete(call));
        call.on('close', () => this.streams.delete(call));
        this.view.totals().then(push, () => undefined);
      },
      GetMetricSpec: unary('GetMetricSpec', async (ref: ScaledObjectRef) => {
        const s = this.scaled(ref);
        return { metricSpecs: [{ metricName: metricNameFor(s.model), targetSize: Math.ceil(s.target), targetSizeFloat: s.target }] };
      }),
      GetMetrics: unary('GetMetrics', async (req: { scaledObjectRef?: ScaledObjectRef; metricName?: string }) => {
        const s = this.scaled(req.scaledObjectRef);
        const value = load((await this.view.totals())[s.model]);
        return { metricValues: [{ metricName: req.metricName || metricNameFor(s.model), metricValue: value, metricValueFloat: value }] };
      }),
    });
  }

  /** The model and target a ScaledObject names, or the gRPC error KEDA should show for it. */
  private scaled(ref: ScaledObjectRef | undefined): Scaled {
    const requested = ref?.scalerMetadata?.model;
    if (!requested) throw new ScalerError(grpc.status.INVALID_ARGUMENT, 'the trigger metadata must name a "model"');
    const target = parseTarget(ref?.scalerMetadata);
    const found = this.view.lookup(requested);
    if (found.kind === 'unknown') {
      throw new ScalerError(
        grpc.status.NOT_FOUND,
        `model ${JSON.stringify(requested)} is not declared or served anywhere this router can see (check the trigger's "model")`,
      );
    }
    if (found.kind === 'not-synced')
      throw new ScalerError(
        grpc.status.UNAVAILABLE,
        `the router has not listed the cluster yet; cannot tell whether ${JSON.stringify(requested)} exists`,
      );
    return { model: found.model, target };
  }

  private grpcError(method: string, err: unknown): Error & { code: grpc.status; details: string } {
    const code = err instanceof ScalerError ? err.code : grpc.status.UNAVAILABLE;
    this.view.onError?.(method, grpc.status[code] ?? String(code));
    if (err instanceof ScalerError) return Object.assign(new Error(err.message), { code: err.code, details: err.message });
    const message = err instanceof Error ? err.message : String(err);
    this.log.warn({ error: message }, 'KEDA scaler could not compute demand');
    return Object.assign(new Error(message), { code: grpc.status.UNAVAILABLE, details: `demand is not available: ${message}` });
  }

  async start(host: string, port: number, tls?: KedaTls): Promise<void> {
    const credentials = tls
      ? grpc.ServerCredentials.createSsl(
          tls.ca === undefined ? null : Buffer.from(tls.ca),
          [{ private_key: Buffer.from(tls.key), cert_chain: Buffer.from(tls.cert) }],
          tls.ca !== undefined,
        )
      : grpc.ServerCredentials.createInsecure();
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${bracketHost(host)}:${port}`, credentials, (err, bound) =>
        // grpc-js says "No address added out of total 1 resolved" whatever the cause; a port taken is the usual one
        err
          ? reject(
              new StartupError(
                `cannot listen on ${host}:${port} for the KEDA scaler (--keda-scaler-port, env LLM_ROUTER_KEDA_SCALER_PORT): ${err.message}; is the port in use?`,
              ),
            )
          : resolve(bound),
      ),
    );
    this.timer = setInterval(() => {
      if (this.streams.size === 0) return;
      // one round of demand (peers included) for every open stream
      this.view.totals().then(
        (totals) => {
          for (const push of this.streams.values()) push(totals);
        },
        () => undefined,
      );
    }, this.pushIntervalMs);
    this.timer.unref();
    this.log.info(
      // the port last: tests and tools read it right before the message
      { tls: tls === undefined ? 'off' : tls.ca === undefined ? 'on' : 'mutual', port: this.port },
      'KEDA external scaler listening (gRPC externalscaler.ExternalScaler)',
    );
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    for (const s of this.streams.keys()) s.end();
    this.streams.clear();
    // KEDA keeps its streams open: give calls a moment to end, then close what is left
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2_000);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }
}
