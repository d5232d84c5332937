// A KEDA-side gRPC client of the external scaler, built from the proto the router serves (externalscaler.ExternalScaler,
// wire-compatible with KEDA's pkg/scalers/externalscaler/externalscaler.proto: same package, service, methods, fields).
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export interface ScaledObjectRef {
  name: string;
  namespace: string;
  scalerMetadata: Record<string, string>;
}

export interface KedaClient {
  isActive(ref: ScaledObjectRef): Promise<boolean>;
  metricSpec(ref: ScaledObjectRef): Promise<{ metricName: string; targetSize: number; targetSizeFloat: number }[]>;
  metric(ref: ScaledObjectRef): Promise<number>;
  /** StreamIsActive: every value pushed, as it arrives */
  stream(ref: ScaledObjectRef): { pushed: boolean[]; errors: grpc.ServiceError[]; cancel(): void };
  close(): void;
}

type Rpc = (arg: unknown, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

/**
 * A client of the scaler at `address`; plaintext unless `credentials` are given (grpc.credentials.createSsl for
 * --keda-tls-cert, with a client certificate for --keda-tls-ca), with `options` such as grpc.ssl_target_name_override.
 */
export function kedaClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ChannelOptions = {},
): KedaClient {
  const def = protoLoader.loadSync(fileURLToPath(new URL('../../proto/externalscaler.proto', import.meta.url)), {
    keepCase: true,
    longs: Number,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    externalscaler: {
      ExternalScaler: new (addr: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => grpc.Client;
    };
  };
  const client = new pkg.externalscaler.ExternalScaler(address, credentials, options);
  const methods = client as unknown as Record<string, Rpc>;
  const rpc = <T>(method: string, arg: unknown): Promise<T> =>
    new Promise((resolve, reject) =>
      methods[method]!.call(client, arg, { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(err) : resolve(res as T))),
    );
  return {
    isActive: async (ref) => (await rpc<{ result: boolean }>('IsActive', ref)).result,
    metricSpec: async (ref) =>
      (await rpc<{ metricSpecs: { metricName: string; targetSize: number; targetSizeFloat: number }[] }>('GetMetricSpec', ref)).metricSpecs,
    metric: async (ref) => {
      const spec = await rpc<{ metricSpecs: { metricName: string }[] }>('GetMetricSpec', ref);
      const res = await rpc<{ metricValues: { metricValue: number; metricValueFloat: number }[] }>('GetMetrics', {
        scaledObjectRef: ref,
        metricName: spec.metricSpecs[0]?.metricName,
      });
      return res.metricValues[0]?.metricValueFloat ?? NaN;
    },
    stream: (ref) => {
      const call = (client as unknown as { StreamIsActive(ref: unknown): grpc.ClientReadableStream<{ result: boolean }> }).StreamIsActive(
        ref,
      );
      const pushed: boolean[] = [];
      const errors: grpc.ServiceError[] = [];
      call.on('data', (d: { result: boolean }) => pushed.push(d.result));
      call.on('error', (e: grpc.ServiceError) => errors.push(e));
      return { pushed, errors, cancel: () => call.cancel() };
    },
    close: () => client.close(),
  };
}

/** The gRPC status code of a failed call. */
export async function grpcCode(p: Promise<unknown>): Promise<{ code: grpc.status; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details };
  }
  throw new Error('the call succeeded');
}

export const GRPC = grpc.status;
export const grpcCredentials = grpc.credentials;
