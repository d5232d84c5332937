// OpenTelemetry tracing settings: vllm_router's flags (--otel-endpoint, --otel-service-name, --otel-secure) over the
// standard OTEL_* variables, which the OpenTelemetry SDK reads itself where no flag says otherwise (flags win).
// Tracing is off unless an endpoint is configured: by --otel-endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT.
import { UsageError } from './flags.js';

export type OtlpProtocol = 'grpc' | 'http/protobuf';

export interface TracingConfig {
  readonly protocol: OtlpProtocol;
  /** the URL the exporter is given; undefined: the SDK's exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself */
  readonly url: string | undefined;
  /** the endpoint as configured, for the startup log */
  readonly endpoint: string;
  /** --otel-service-name; undefined: OTEL_SERVICE_NAME or service.name of OTEL_RESOURCE_ATTRIBUTES, else vllm-router */
  readonly serviceName: string | undefined;
}

/** vllm_router's default service name */
export const DEFAULT_SERVICE_NAME = 'vllm-router';

const TRACES_PATH = /\/v1\/traces\/?$/;

function nonBlank(v: string | undefined): string | undefined {
  const t = v?.trim();
  return t ? t : undefined;
}

function protocolByUrl(url: string): OtlpProtocol {
  try {
    return TRACES_PATH.test(new URL(url).pathname) ? 'http/protobuf' : 'grpc';
  } catch {
    return 'grpc';
  }
}

/** The tracing settings, or undefined when no endpoint is configured (tracing off). */
export function tracingSection(
  v: { readonly 'otel-endpoint': string | undefined; readonly 'otel-service-name': string | undefined; readonly 'otel-secure': boolean },
  env: Readonly<Record<string, string | undefined>>,
): TracingConfig | undefined {
  const serviceName = nonBlank(v['otel-service-name']);
  const flag = nonBlank(v['otel-endpoint']);
  if (flag !== undefined) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(flag)) {
      let url: URL;
      try {
        url = new URL(flag);
      } catch {
        throw new UsageError(`--otel-endpoint: ${JSON.stringify(flag)} is not a URL; use HOST:PORT or http(s)://HOST:PORT[/v1/traces]`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new UsageError(`--otel-endpoint: ${JSON.stringify(flag)}: the scheme must be http or https (or none: HOST:PORT)`);
      if (v['otel-secure'] && url.protocol === 'http:')
        throw new UsageError(`--otel-secure contradicts --otel-endpoint ${flag}: use https:// or leave the scheme out`);
      return { protocol: protocolByUrl(flag), url: flag, endpoint: flag, serviceName };
    }
    if (!/^(\[[0-9a-fA-F:.]+\]|[^\s/:[\]]+):[0-9]{1,5}$/.test(flag))
      throw new UsageError(`--otel-endpoint: ${JSON.stringify(flag)} must be HOST:PORT (e.g. localhost:4317) or an http(s):// URL`);
    return { protocol: 'grpc', url: `${v['otel-secure'] ? 'https' : 'http'}://${flag}`, endpoint: flag, serviceName };
  }
  const tracesEndpoint = nonBlank(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const endpoint = tracesEndpoint ?? nonBlank(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (endpoint === undefined) return undefined;
  const named = nonBlank(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? nonBlank(env.OTEL_EXPORTER_OTLP_PROTOCOL);
  if (named !== undefined && named !== 'grpc' && named !== 'http/protobuf')
    throw new UsageError(`OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=${named}: llm-router exports traces over grpc or http/protobuf`);
  // without a protocol named: gRPC, unless the traces endpoint is an OTLP/HTTP traces URL
  const protocol: OtlpProtocol = named ?? (tracesEndpoint !== undefined ? protocolByUrl(tracesEndpoint) : 'grpc');
  return { protocol, url: undefined, endpoint, serviceName };
}
