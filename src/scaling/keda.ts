// KEDA external scaler (gRPC externalscaler.ExternalScaler): tells KEDA whether a model is in demand and how much,
// so a model at zero replicas wakes on the first request and stays up while requests are held or in flight.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Logger } from '../util/log.js';

const PROTO = fileURLToPath(new URL('../../proto/externalscaler.proto', import.meta.url));

export interface ScalerView {
  /** canonical name for a requested one (aliases resolved); undefined when no source knows it */
  canonical(model: string): string | undefined;
  active(model: string): boolean;
  /** requests held + in flight for the model */
  load(model: string): number;
}

interface ScaledObjectRef {
  name?: string;
  namespace?: string;
  scalerMetadata?: Record<string, string>;
}

/** KEDA metric names must be DNS-label-like; model names may hold slashes and dots. */
export function metricNameFor(model: string): string {
  return `llm-router-${model.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '')}`.slice(0, 63);
}

function modelOf(ref: ScaledObjectRef | undefined): string {
  const model = ref?.scalerMetadata?.model;
  if (!model) throw Object.assign(new Error('scaler metadata must name a "model"'), { code: grpc.status.INVALID_ARGUMENT });
  return model;
}

export class KedaScaler {
  private readonly server = new grpc.Server();
  /** open StreamIsActive calls and the function that pushes a change to each */
  private readonly streams = new Map<grpc.ServerWritableStream<ScaledObjectRef, { result: boolean }>, () => void>();
  private timer: NodeJS.Timeout | undefined;
  port = 0;

  constructor(
    private readonly view: ScalerView,
    private readonly log: Logger,
    private readonly pushIntervalMs = 1_000,
  ) {
    const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: Number, defaults: true });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { externalscaler: { ExternalScaler: { service: grpc.ServiceDefinition } } };
    const model = (ref: ScaledObjectRef | undefined): string => {
      const requested = modelOf(ref);
      return this.view.canonical(requested) ?? requested;
    };
    this.server.addService(pkg.externalscaler.ExternalScaler.service, {
      IsActive: (call: grpc.ServerUnaryCall<ScaledObjectRef, unknown>, cb: grpc.sendUnaryData<{ result: boolean }>) => {
        try {
          cb(null, { result: this.view.active(model(call.request)) });
        } catch (err) {
          cb(err as grpc.ServiceError);
        }
      },
      StreamIsActive: (call: grpc.ServerWritableStream<ScaledObjectRef, { result: boolean }>) => {
        let name: string;
        try {
          name = model(call.request);
        } catch (err) {
          call.destroy(err as Error);
          return;
        }
        let last: boolean | undefined;
        const push = (): void => {
          const now = this.view.active(name);
          if (now !== last) {
            last = now;
            call.write({ result: now });
          }
        };
        this.streams.set(call, push);
        call.on('cancelled', () => this.streams.delete(call));
        call.on('close', () => this.streams.delete(call));
        push();
      },
      GetMetricSpec: (call: grpc.ServerUnaryCall<ScaledObjectRef, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        try {
          const name = model(call.request);
          const target = Number(call.request.scalerMetadata?.targetValue ?? call.request.scalerMetadata?.target ?? 8);
          const size = Number.isFinite(target) && target > 0 ? target : 8;
          cb(null, { metricSpecs: [{ metricName: metricNameFor(name), targetSize: Math.ceil(size), targetSizeFloat: size }] });
        } catch (err) {
          cb(err as grpc.ServiceError);
        }
      },
      GetMetrics: (call: grpc.ServerUnaryCall<{ scaledObjectRef?: ScaledObjectRef; metricName?: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        try {
          const name = model(call.request.scaledObjectRef);
          const value = this.view.load(name);
          cb(null, { metricValues: [{ metricName: call.request.metricName || metricNameFor(name), metricValue: value, metricValueFloat: value }] });
        } catch (err) {
          cb(err as grpc.ServiceError);
        }
      },
    });
  }

  async start(host: string, port: number): Promise<void> {
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
    );
    this.timer = setInterval(() => {
      for (const push of this.streams.values()) push();
    }, this.pushIntervalMs);
    this.timer.unref();
    this.log.info({ port: this.port }, 'KEDA external scaler listening (gRPC externalscaler.ExternalScaler)');
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    for (const s of this.streams.keys()) s.end();
    this.streams.clear();
    await new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
  }
}
