// The audio routes as vLLM answers them: POST /v1/audio/transcriptions and /v1/audio/translations take a
// multipart/form-data body (a `file` part, a `model` field, `response_format` json | text | verbose_json, `stream`),
// and answer {"text": ...}. The body is streamed through busboy and a SHA-256 (recorded for GET /_sim/requests), the
// file is counted, never kept.
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type busboy from 'busboy';
import { lazyModule } from '../../router/util/lazy-module.js';
import type { EngineContext } from './context.js';
import { answerLater, newId } from './generation.js';
import { BodyError, sendJson } from './http-io.js';
import { errorBody } from './openai.js';
import type { Exchange } from './request-stats.js';
import { fillerText } from './tokens.js';

const loadBusboy = lazyModule<typeof busboy>('busboy');

export const AUDIO_PATHS: ReadonlySet<string> = new Set(['/v1/audio/transcriptions', '/v1/audio/translations']);
/** bodies up to this size are kept whole for GET /_sim/requests; larger ones by their SHA-256 and length only */
const KEEP_BODY_BYTES = 1024 * 1024;
const FORMATS = new Set(['json', 'text', 'verbose_json']);

export interface AudioRequest {
  readonly fields: Record<string, string>;
  /** the whole body when it is at most KEEP_BODY_BYTES, else undefined */
  readonly raw: Buffer | undefined;
  readonly sha256: string;
  readonly bytes: number;
  readonly fileBytes: number;
}

/** Reads a multipart/form-data body as it arrives: its fields, the file's length, the body's SHA-256. */
export function readMultipart(req: http.IncomingMessage): Promise<AudioRequest> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = loadBusboy()({ headers: req.headers });
    } catch (err) {
      req.resume();
      reject(new BodyError(400, `Invalid multipart/form-data body: ${(err as Error).message}`));
      return;
    }
    const hash = createHash('sha256');
    const kept: Buffer[] = [];
    let bytes = 0;
    let fileBytes = 0;
    const fields: Record<string, string> = {};
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
      if (bytes <= KEEP_BODY_BYTES) kept.push(chunk);
    });
    req.on('close', () => {
      if (!req.complete) reject(new BodyError(499, 'client closed the connection'));
    });
    bb.on('field', (name, value) => {
      if (!(name in fields)) fields[name] = value;
    });
    bb.on('file', (_name, stream) => {
      stream.on('error', () => undefined);
      stream.on('data', (d: Buffer) => {
        fileBytes += d.length;
      });
    });
    bb.on('error', (err: Error) => {
      req.unpipe(bb);
      req.resume();
      reject(new BodyError(400, `Invalid multipart/form-data body: ${err.message}`));
    });
    bb.on('close', () =>
      resolve({
        fields,
        raw: bytes <= KEEP_BODY_BYTES ? Buffer.concat(kept) : undefined,
        sha256: hash.digest('hex'),
        bytes,
        fileBytes,
      }),
    );
    req.pipe(bb);
  });
}

/** The answer to a checked audio request, after the engine's time to first token. */
export function answerAudio(
  engine: EngineContext,
  res: http.ServerResponse,
  exchange: Exchange,
  path: string,
  fields: Readonly<Record<string, unknown>>,
  model: string,
  fileBytes: number,
): void {
  const format = typeof fields.response_format === 'string' ? fields.response_format : 'json';
  if (!FORMATS.has(format)) {
    const message = `Unsupported response_format ${JSON.stringify(format)}: json, text or verbose_json.`;
    return sendJson(res, 400, errorBody(message, 'BadRequestError', 400, 'response_format'));
  }
  const task = path.endsWith('translations') ? 'translate' : 'transcribe';
  const words = 8;
  const text = `${fillerText(words)}`.trim();
  const language = typeof fields.language === 'string' ? fields.language : 'en';
  // a simulated clip: 16 kB of audio per second
  const duration = Math.max(0.1, Math.round((fileBytes / 16_000) * 100) / 100);
  const record = { finishReason: 'stop', prompt: 0, generated: words };
  if (fields.stream === true) {
    const id = `trsc-${newId()}`;
    const created = Math.floor(Date.now() / 1000);
    return answerLater(
      engine,
      res,
      exchange,
      engine.timing.ttftMs,
      record,
      () => ({ text }),
      (r) => {
        if (r.destroyed) return;
        r.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const pieces = text.split(/(?<= )/);
        for (const [i, piece] of pieces.entries()) {
          const last = i === pieces.length - 1;
          const chunk = {
            id,
            object: 'transcription.chunk',
            created,
            model,
            choices: [{ delta: { content: piece }, ...(last ? { finish_reason: 'stop', stop_reason: null } : {}) }],
          };
          r.write(`data: ${JSON.stringify(chunk)}\n\n`);
        }
        r.end('data: [DONE]\n\n');
      },
    );
  }
  const build = (): object =>
    format === 'verbose_json'
      ? { task, language, duration, text, segments: [{ id: 0, seek: 0, start: 0, end: duration, text, tokens: [], temperature: 0 }] }
      : { text };
  if (format === 'text')
    return answerLater(engine, res, exchange, engine.timing.ttftMs, record, build, (r, answer) => {
      if (r.destroyed || r.headersSent) return;
      const body = (answer as { text: string }).text;
      r.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      r.end(body);
    });
  answerLater(engine, res, exchange, engine.timing.ttftMs, record, build);
}
