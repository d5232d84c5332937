// The audio routes (/v1/audio/transcriptions, /v1/audio/translations) carry their model as a multipart/form-data
// field. The body is parsed with busboy over the one buffer the router already holds (bounded by --max-body-bytes,
// as every body is): the file part is skipped as it is parsed, never copied; the fields are kept for routing. The
// bytes forwarded are the client's, byte for byte (an alias rewrites only the model field: rewriteMultipartModel).
import type busboy from 'busboy';
import { lazyModule } from '../util/lazy-module.js';
import { errors, type RouterError } from './errors.js';

const loadBusboy = lazyModule<typeof busboy>('busboy');

/** Paths routed by the `model` field of a multipart/form-data body. */
export const AUDIO_PATHS: readonly string[] = ['/v1/audio/transcriptions', '/v1/audio/translations'];

/**
 * The largest body a path takes: an audio route --max-body-bytes (an upload), any other (JSON) the smaller of that and
 * --max-json-body-bytes when it is given.
 */
export function bodyLimitFor(path: string, maxBodyBytes: number, maxJsonBodyBytes: number | undefined): number {
  return maxJsonBodyBytes === undefined || AUDIO_PATHS.includes(path) ? maxBodyBytes : Math.min(maxBodyBytes, maxJsonBodyBytes);
}

/** a form field longer than this is refused (model names, languages and prompts are short; the file is a file part) */
const MAX_FIELD_BYTES = 1024 * 1024;

export type ParsedMultipart =
  | { readonly ok: true; readonly body: Record<string, unknown>; readonly model: string; readonly boundary: string }
  | { readonly ok: false; readonly error: RouterError };

/** The boundary of a multipart/form-data content type, or undefined when it is not one. */
export function formBoundary(contentType: string | undefined): string | undefined {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return undefined;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? ((m[1] ?? m[2]) as string) : undefined;
}

/** Reads the form fields of a whole multipart/form-data body; the file parts are skipped. */
export function parseMultipart(raw: Buffer, contentType: string | undefined): Promise<ParsedMultipart> {
  const boundary = formBoundary(contentType);
  if (boundary === undefined)
    return Promise.resolve({
      ok: false,
      error: errors.invalidMultipart(
        `an audio request must be multipart/form-data with a boundary (got ${contentType ? JSON.stringify(contentType) : 'no content-type'})`,
      ),
    });
  return new Promise((resolve) => {
    const fields: Record<string, unknown> = {};
    let failure: string | undefined;
    let settled = false;
    const done = (r: ParsedMultipart): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    let bb: busboy.Busboy;
    try {
      bb = loadBusboy()({ headers: { 'content-type': contentType as string }, limits: { fieldSize: MAX_FIELD_BYTES } });
    } catch (err) {
      done({ ok: false, error: errors.invalidMultipart((err as Error).message) });
      return;
    }
    bb.on('field', (name, value, info) => {
      if (info.valueTruncated) failure ??= `the field ${JSON.stringify(name)} is longer than ${MAX_FIELD_BYTES} bytes`;
      // the first value of a repeated field counts, as the engine's form parser reads it
      if (!(name in fields)) fields[name] = value;
    });
    bb.on('file', (_name, stream) => {
      // a form cut short destroys the open file part with the error that 'error' below reports
      stream.on('error', () => undefined);
      stream.resume();
    });
    bb.on('error', (err: Error) => done({ ok: false, error: errors.invalidMultipart(err.message) }));
    bb.on('close', () => {
      if (failure !== undefined) return done({ ok: false, error: errors.invalidMultipart(failure) });
      const model = fields.model;
      if (model === undefined) return done({ ok: false, error: errors.modelRequired('"model" is a required form field') });
      if (typeof model !== 'string' || model.length === 0)
        return done({ ok: false, error: errors.modelRequired('"model" must be a non-empty string') });
      // `stream` is a form field too: the same meaning as JSON's boolean for the router's own bookkeeping
      const body = { ...fields, ...(fields.stream !== undefined ? { stream: fields.stream === 'true' } : {}) };
      done({ ok: true, body, model, boundary });
    });
    bb.end(raw);
  });
}
