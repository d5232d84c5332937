// The least a Node process can do as an HTTP/1.1 proxy: net sockets on both sides, heads found with indexOf, the
// request and the answer each passed on in one write, chunked answers passed through as they are (only scanned for
// their end), no validation, no model lookup, no headers filtered. The benchmark's "node raw" column: the ceiling of
// this platform on this machine, to tell what Node itself costs from what the router adds. Only for the bench's
// upstream (well-formed answers, Content-Length or chunked); never a proxy for real use.
// Usage: node --import tsx bench/raw-proxy.ts --port P --upstream-port U
import net from 'node:net';

function arg(name: string): number {
  const i = process.argv.indexOf(`--${name}`);
  return Number(process.argv[i + 1]);
}

const upstreamPort = arg('upstream-port');
const HEAD_END = Buffer.from('\r\n\r\n');
const LAST_CHUNK = Buffer.from('0\r\n\r\n');
const idle: net.Socket[] = [];

/** Content-Length of a head (-1 if none) and whether it is chunked. */
function framing(head: string): { length: number; chunked: boolean } {
  const lower = head.toLowerCase();
  const cl = lower.indexOf('\r\ncontent-length:');
  const length = cl < 0 ? -1 : parseInt(lower.slice(cl + 17, lower.indexOf('\r\n', cl + 17)), 10);
  return { length, chunked: lower.includes('\r\ntransfer-encoding: chunked') };
}

function withUpstream(use: (s: net.Socket) => void): void {
  const s = idle.pop();
  if (s && !s.destroyed) return use(s);
  const c = net.connect({ port: upstreamPort, host: '127.0.0.1', noDelay: true }, () => use(c));
  c.on('error', () => c.destroy());
}

function relay(client: net.Socket, request: Buffer, done: () => void): void {
  withUpstream((up) => {
    let head: Buffer | undefined;
    let remaining = -1;
    let chunked = false;
    let tail: Buffer = Buffer.alloc(0);
    const finish = (): void => {
      up.off('data', onData);
      idle.push(up);
      done();
    };
    const onData = (d: Buffer): void => {
      if (remaining < 0 && !chunked) {
        head = head ? Buffer.concat([head, d]) : d;
        const end = head.indexOf(HEAD_END);
        if (end < 0) return;
        const f = framing(head.toString('latin1', 0, end));
        chunked = f.chunked;
        remaining = f.length < 0 ? 0 : f.length - (head.length - end - 4);
        d = head;
      } else if (!chunked) {
        remaining -= d.length;
      }
      client.write(d);
      if (chunked) {
        // the end of a chunked answer: its last bytes are the zero chunk (may straddle two reads)
        tail = Buffer.concat([tail, d.subarray(Math.max(0, d.length - LAST_CHUNK.length))]).subarray(-LAST_CHUNK.length);
        if (tail.equals(LAST_CHUNK)) finish();
      } else if (remaining <= 0) {
        finish();
      }
    };
    up.on('data', onData);
    up.write(request);
  });
}

net
  .createServer({ noDelay: true }, (client) => {
    let buffered: Buffer = Buffer.alloc(0);
    let busy = false;
    client.on('error', () => client.destroy());
    const next = (): void => {
      if (busy) return;
      const end = buffered.indexOf(HEAD_END);
      if (end < 0) return;
      const { length } = framing(buffered.toString('latin1', 0, end));
      const total = end + 4 + Math.max(length, 0);
      if (buffered.length < total) return;
      const request = buffered.subarray(0, total);
      buffered = buffered.subarray(total);
      busy = true;
      relay(client, request, () => {
        busy = false;
        next();
      });
    };
    client.on('data', (d: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, d]) : d;
      next();
    });
  })
  .listen({ port: arg('port'), host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
