// A minimal fixed upstream for the benchmark: raw TCP, pre-built answers, so that it is never the bottleneck.
// POST with "stream":true in the body -> an SSE stream of --chunks events, one write per event loop turn (as an engine
// sends tokens); any other POST -> a fixed chat completion; GET /v1/models -> the one model (for the router's prober).
// Usage: node --import tsx bench/upstream.ts --port P [--chunks 50] [--model bench-model]
import net from 'node:net';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : fallback;
}

const port = Number(arg('port', '0'));
const chunks = Number(arg('chunks', '50'));
const model = arg('model', 'bench-model');

const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_700_000_000,
  model,
  choices: [{ index: 0, message: { role: 'assistant', content: 'The quick brown fox jumps over the lazy dog.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 10, total_tokens: 22 },
});
const JSON_ANSWER = Buffer.from(
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(completion)}\r\n\r\n${completion}`,
);
const modelsBody = JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', created: 0, owned_by: 'bench' }] });
const MODELS_ANSWER = Buffer.from(
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${modelsBody.length}\r\n\r\n${modelsBody}`,
);
const NOT_FOUND = Buffer.from('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');

const SSE_HEAD = Buffer.from(
  'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n',
);
function httpChunk(text: string): Buffer {
  return Buffer.from(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
}
const SSE_EVENT = httpChunk(
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta: { content: ' token' }, finish_reason: null }] })}\n\n`,
);
const SSE_END = Buffer.concat([httpChunk('data: [DONE]\n\n'), Buffer.from('0\r\n\r\n')]);

const HEAD_END = Buffer.from('\r\n\r\n');
const STREAM_TRUE = Buffer.from('"stream":true');

class Conn {
  private buf: Buffer = Buffer.alloc(0);
  private streaming = false;

  constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.serve();
    });
    socket.on('error', () => socket.destroy());
  }

  /** Answers every complete request in the buffer, in order; waits while a stream is being sent. */
  private serve(): void {
    while (!this.streaming && !this.socket.destroyed) {
      const headEnd = this.buf.indexOf(HEAD_END);
      if (headEnd < 0) return;
      const head = this.buf.toString('latin1', 0, headEnd);
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const length = m ? Number(m[1]) : 0;
      const end = headEnd + 4 + length;
      if (this.buf.length < end) return;
      const body = this.buf.subarray(headEnd + 4, end);
      this.buf = this.buf.subarray(end);
      if (head.startsWith('POST ')) {
        if (body.indexOf(STREAM_TRUE) >= 0) this.stream();
        else this.socket.write(JSON_ANSWER);
      } else if (head.startsWith('GET /v1/models ')) {
        this.socket.write(MODELS_ANSWER);
      } else {
        this.socket.write(NOT_FOUND);
      }
    }
  }

  private stream(): void {
    this.streaming = true;
    this.socket.write(SSE_HEAD);
    let sent = 0;
    const next = (): void => {
      if (this.socket.destroyed) return;
      if (sent < chunks) {
        sent++;
        this.socket.write(SSE_EVENT);
        setImmediate(next);
        return;
      }
      this.socket.write(SSE_END);
      this.streaming = false;
      this.serve();
    };
    setImmediate(next);
  }
}

const server = net.createServer({ noDelay: true }, (socket) => new Conn(socket));
server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => {
  process.stdout.write(`upstream listening on ${(server.address() as net.AddressInfo).port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
