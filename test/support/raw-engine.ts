// An engine made of a raw `net` server, for tests that need exact control of the bytes an engine sends and an
// exact record of the bytes that reach it. It parses requests (head + Content-Length body, one after another per
// connection), answers the router's readiness probe (GET /v1/models) itself, and answers every other request with
// the reply the test chose: by the request's `x-case` header when the test registered one of that name, else a small
// JSON echo. Everything runs on 127.0.0.1, port 0; close() ends every connection.
import net from 'node:net';
import { readRequests } from './raw-http.js';

export interface EngineRequest {
  /** connection index (accept order) and request index on that connection */
  readonly conn: number;
  readonly n: number;
  readonly method: string;
  readonly path: string;
  /** lower-case names */
  readonly headers: Readonly<Record<string, string>>;
  readonly head: string;
  readonly body: Buffer;
}

export interface EngineConnection {
  readonly socket: net.Socket;
  /** every byte that reached the engine on this connection */
  received: Buffer;
  /** requests parsed on it so far */
  requests: number;
  closed: boolean;
}

/** Writes an answer (or misbehaves) on the socket the request came on. */
export type Reply = (socket: net.Socket, req: EngineRequest) => void;

/** The default answer: JSON naming the request id and the body length it saw, framed by Content-Length. */
export function echoJson(socket: net.Socket, req: EngineRequest): void {
  const body = JSON.stringify({ id: req.headers['x-request-id'] ?? '', object: 'chat.completion', bytes: req.body.length });
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/** not one of the router's own probes or stats scrapes, which come and go on their timers */
export function isForwarded(r: EngineRequest): boolean {
  return !(r.method === 'GET' && (r.path === '/v1/models' || r.path === '/metrics'));
}

export class RawEngine {
  readonly requests: EngineRequest[] = [];
  readonly connections: EngineConnection[] = [];
  /** replies by the request's x-case header */
  readonly cases = new Map<string, Reply>();
  private server!: net.Server;
  port = 0;

  private constructor(readonly models: readonly string[]) {}

  static async start(models: readonly string[]): Promise<RawEngine> {
    const engine = new RawEngine(models);
    engine.server = net.createServer((socket) => engine.accept(socket));
    await new Promise<void>((resolve) => engine.server.listen(0, '127.0.0.1', resolve));
    engine.port = (engine.server.address() as net.AddressInfo).port;
    return engine;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** requests other than the router's probes and stats scrapes */
  get inference(): EngineRequest[] {
    return this.requests.filter(isForwarded);
  }

  private accept(socket: net.Socket): void {
    const conn = this.connections.length;
    const record: EngineConnection = { socket, received: Buffer.alloc(0), requests: 0, closed: false };
    this.connections.push(record);
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    socket.on('close', () => (record.closed = true));
    socket.on('data', (data: Buffer) => {
      record.received = Buffer.concat([record.received, data]);
    });
    let n = 0;
    readRequests(socket, (head, body) => {
      const lines = head.split('\r\n');
      const [method = '', path = ''] = (lines[0] ?? '').split(' ');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const req: EngineRequest = { conn, n: n++, method, path, headers, head, body };
      this.requests.push(req);
      record.requests++;
      this.answer(socket, req);
    });
  }

  private answer(socket: net.Socket, req: EngineRequest): void {
    if (req.method === 'GET' && req.path === '/v1/models') {
      const body = JSON.stringify({ object: 'list', data: this.models.map((id) => ({ id, object: 'model' })) });
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      return;
    }
    const reply = this.cases.get(req.headers['x-case'] ?? '') ?? echoJson;
    reply(socket, req);
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
