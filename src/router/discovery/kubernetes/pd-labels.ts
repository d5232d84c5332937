// What a pod or workload says about prefill/decode disaggregation: its role (the llm-d.ai/role label, as llm-d's
// scheduler reads it), the P/D protocol of its model, the port its probes go to when traffic goes through a sidecar,
// and an SGLang prefill's bootstrap port. Shared with `llm-router lint`.
import { isPdProtocol, type EndpointRole, type PdProtocol } from '../../core/pd.js';

export const ROLE_LABEL = 'llm-d.ai/role';
export const PD_PROTOCOL_ANNOTATION = 'llm-router/pd-protocol';
export const PROBE_PORT_ANNOTATION = 'llm-router/probe-port';
export const BOOTSTRAP_PORT_ANNOTATION = 'sglang.ai/bootstrap-port';

/** llm-d's values; `both` is its older spelling of prefill-decode */
const ROLE_VALUES: ReadonlyMap<string, EndpointRole> = new Map([
  ['prefill', 'prefill'],
  ['decode', 'decode'],
  ['prefill-decode', 'both'],
  ['both', 'both'],
]);

type Labels = Readonly<Record<string, string>> | undefined;

/** The role a pod's labels give it: both without the label; undefined for a value the router does not serve (e.g. encode). */
export function roleOf(labels: Labels): EndpointRole | undefined {
  const raw = labels?.[ROLE_LABEL];
  if (raw === undefined) return 'both';
  return ROLE_VALUES.get(raw.trim().toLowerCase());
}

/** The llm-router/pd-protocol annotation: the protocol, undefined without one, or the invalid value as `invalid`. */
export function pdProtocolOf(annotations: Labels): { protocol?: PdProtocol; invalid?: string } {
  const raw = annotations?.[PD_PROTOCOL_ANNOTATION]?.trim();
  if (raw === undefined || raw === '') return {};
  return isPdProtocol(raw) ? { protocol: raw } : { invalid: raw };
}

/** A port number from an annotation, or undefined when absent or not a port. */
export function portAnnotation(annotations: Labels, name: string): number | undefined {
  const raw = annotations?.[name];
  const n = Number(raw);
  return raw !== undefined && Number.isInteger(n) && n > 0 && n < 65536 ? n : undefined;
}
