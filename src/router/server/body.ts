// Reads a request body into one Buffer, refusing more than the limit without buffering it.
import type { IncomingMessage } from 'node:http';

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`body larger than ${limit} bytes`);
  }
}
class ClientAbortedError extends Error {}

/** a declared body at least this large is copied into one buffer as it arrives instead of concatenated at its end */
const COPY_INTO_BYTES = 1024 * 1024;

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new BodyTooLargeError(limit));
  // a large declared body (an audio upload) is copied into one buffer as it arrives: never held twice
  const into = declared !== undefined && Number(declared) >= COPY_INTO_BYTES ? Buffer.allocUnsafe(Number(declared)) : undefined;
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      if (into && size <= into.length) chunk.copy(into, size - chunk.length);
      else chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      if (into) resolve(size === into.length ? into : into.subarray(0, Math.min(size, into.length)));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(new ClientAbortedError(err.message));
    };
    const onClose = (): void => {
      if (req.complete) return;
      cleanup();
      reject(new ClientAbortedError('client closed the connection while sending the body'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Reads and throws away the rest of a refused body, so the 413 reaches a client that writes its whole body before
 * reading (closing with unread data would reset the connection). Resolves false if more than `limit` bytes
 * follow or the client goes away (the caller then closes the connection); the client timeout bounds the time.
 */
export function discardBody(req: IncomingMessage, limit: number): Promise<boolean> {
  if (req.complete) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    let seen = 0;
    const done = (drained: boolean): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onClose);
      if (!drained) req.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > limit) done(false);
    };
    const onEnd = (): void => done(true);
    const onClose = (): void => done(req.complete);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.on('error', onClose);
    req.resume();
  });
}
