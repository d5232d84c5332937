// Validation of fault-switch bodies (`POST /_sim/fault`) and of the startup --fault flags.
import { FAULT_MODES, type Fault, type FaultMode } from './types.js';

export class FaultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FaultError';
  }
}

export const DEFAULT_SLOW_CHUNK_DELAY_MS = 500;
export const DEFAULT_RESET_AFTER_CHUNKS = 2;

function isFaultMode(value: unknown): value is FaultMode {
  return typeof value === 'string' && (FAULT_MODES as readonly string[]).includes(value);
}

function optionalNumber(body: Record<string, unknown>, key: string, integer: boolean): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (integer && !Number.isInteger(value))) {
    throw new FaultError(`"${key}" must be a ${integer ? 'whole ' : ''}number >= 0, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Turns a decoded JSON body into a Fault; throws FaultError with a one-line reason. */
export function parseFault(body: unknown): Fault {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new FaultError('body must be a JSON object like {"mode":"none"}');
  const record = body as Record<string, unknown>;
  const mode = record.mode;
  if (!isFaultMode(mode)) throw new FaultError(`"mode" must be one of ${FAULT_MODES.join(', ')}; got ${JSON.stringify(mode)}`);
  const scope = record.scope;
  if (scope !== undefined && scope !== 'inference' && scope !== 'all')
    throw new FaultError(`"scope" must be "inference" or "all", got ${JSON.stringify(scope)}`);
  const fault: { -readonly [K in keyof Fault]: Fault[K] } = { mode };
  const seconds = optionalNumber(record, 'seconds', false);
  const delayMs = optionalNumber(record, 'delayMs', false);
  const afterChunks = optionalNumber(record, 'afterChunks', true);
  if (seconds !== undefined) fault.seconds = seconds;
  if (delayMs !== undefined) fault.delayMs = delayMs;
  if (afterChunks !== undefined) fault.afterChunks = afterChunks;
  if (scope !== undefined) fault.scope = scope;
  return fault;
}
