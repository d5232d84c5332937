// The floor for a Node proxy on this stack: node:http in, undici Pool.dispatch out, bytes passed through, nothing else
// (no model lookup, no header filtering, no metrics, no failover). The benchmark's "node floor" column: what the
// router's design could reach at best, so that the router's own overhead is told apart from the platform's.
// Usage: node --import tsx bench/floor-proxy.ts --port P --upstream-port U
import http from 'node:http';
import { Pool, type Dispatcher } from 'undici';

function arg(name: string): number {
  const i = process.argv.indexOf(`--${name}`);
  return Number(process.argv[i + 1]);
}

const pool = new Pool(`http://127.0.0.1:${arg('upstream-port')}`, { pipelining: 1, keepAliveTimeout: 4_000, connect: { noDelay: true } });

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const handler: Dispatcher.DispatchHandler = {
      onConnect() {},
      onHeaders(status: number, raw: Buffer[], resume: () => void) {
        res.on('drain', resume);
        const headers: string[] = [];
        for (let i = 0; i < raw.length; i += 2) {
          const name = (raw[i] as Buffer).toString('latin1');
          if (name.toLowerCase() !== 'transfer-encoding') headers.push(name, (raw[i + 1] as Buffer).toString('latin1'));
        }
        res.writeHead(status, headers);
        return true;
      },
      onData: (chunk: Buffer) => res.write(chunk),
      onComplete: () => res.end(),
      onError: () => res.destroy(),
    } as Dispatcher.DispatchHandler;
    pool.dispatch(
      { method: 'POST', path: req.url ?? '/', headers: ['content-type', 'application/json', 'content-length', String(body.length)], body },
      handler,
    );
  });
});
server.listen(arg('port'), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
