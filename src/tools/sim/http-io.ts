// Request-body reading (size-capped, JSON-object only) and the JSON / empty answers every engine path sends.
import type http from 'node:http';

const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** A body that cannot be read: its HTTP status, or 499 when the client closed the connection first. */
export class BodyError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BodyError(413, `request body larger than ${MAX_BODY_BYTES} bytes`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => reject(new BodyError(499, 'client closed the connection')));
  });
}

export async function readJsonObject(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return (await readJsonRequest(req)).body;
}

/** The body parsed, with the bytes it came as (the request log keeps them; P/D checks read a room's exact digits). */
export async function readJsonRequest(req: http.IncomingMessage): Promise<{ body: Record<string, unknown>; raw: Buffer }> {
  const raw = await readBody(req);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new BodyError(400, `Invalid JSON body: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new BodyError(400, 'The request body must be a JSON object.');
  return { body: parsed as Record<string, unknown>, raw };
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed || res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendEmpty(res: http.ServerResponse, status: number): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(status, { 'content-length': 0 });
  res.end();
}
