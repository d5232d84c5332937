// What the inference path needs of a request and of a response. node:http's IncomingMessage and ServerResponse
// satisfy these; so do the fast path's own objects (src/router/server/fast), which skip node:http for plain requests.
import type { IncomingHttpHeaders } from 'node:http';

export interface InboundRequest {
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly socket: { readonly bytesWritten: number; readonly remoteAddress?: string | undefined };
}

/** The part of ServerResponse the inference path uses (write() and end() keep node's meaning, 'close' too). */
export interface ResponseSink {
  statusCode: number;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  setHeader(name: string, value: string | number): unknown;
  /** headers as a flat [name, value, ...] list */
  writeHead(statusCode: number, headers: string[]): unknown;
  flushHeaders(): void;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  destroy(): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  once(event: 'close', listener: () => void): unknown;
  off(event: 'close' | 'drain', listener: () => void): unknown;
}
