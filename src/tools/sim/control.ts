// The simulator's own control paths under /_sim/: read and reset the request statistics, read and switch the fault,
// read the KV-cache event publisher and throw its switches.
import type http from 'node:http';
import type { EngineContext } from './context.js';
import type { SimEngine, SimKvSwitch } from './engine-api.js';
import { parseFault } from './faults.js';
import { BodyError, readJsonObject, sendJson } from './http-io.js';
import { errorBody } from './openai.js';
import type { Fault } from './types.js';

export async function answerControl(
  engine: SimEngine & EngineContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
): Promise<void> {
  const describe = (): object => ({ ...engine.fault(), phase: engine.phase(), loadedAt: engine.loadedAt() });
  if (path === '/_sim/stats' && req.method === 'GET') return sendJson(res, 200, engine.stats());
  if (path === '/_sim/requests' && req.method === 'GET') return sendJson(res, 200, { requests: engine.requests.recent });
  if (path === '/_sim/traceparents' && req.method === 'GET') return sendJson(res, 200, { traceparents: engine.requests.traceparents });
  if ((path === '/_sim/kv/pull' || path === '/_sim/bootstrap/join') && req.method === 'POST') {
    let body: Record<string, unknown>;
    try {
      body = await readJsonObject(req);
    } catch {
      return sendJson(res, 400, errorBody('a JSON object is needed', 'BadRequestError', 400));
    }
    const pd = engine.pd;
    const status = pd === undefined ? 404 : path === '/_sim/kv/pull' ? pd.pull(engine, body) : await pd.join(engine, body);
    return sendJson(res, status, { status });
  }
  if (path === '/_sim/reset-stats' && req.method === 'POST') {
    req.resume();
    engine.resetStats();
    return sendJson(res, 200, engine.stats());
  }
  if (path === '/_sim/kv-events' && req.method === 'GET') return sendJson(res, 200, engine.kvEvents() ?? { enabled: false });
  if (path === '/_sim/kv-events' && req.method === 'POST') {
    let action: SimKvSwitch;
    try {
      action = parseKvSwitch(await readJsonObject(req));
    } catch (err) {
      if (err instanceof BodyError && err.status === 499) return;
      return sendJson(res, 400, errorBody((err as Error).message, 'BadRequestError', 400));
    }
    if (!('clear' in action) && engine.kvEvents() === undefined)
      return sendJson(res, 409, errorBody('KV-cache events are off (no --kv-events-port)', 'ConflictError', 409));
    engine.kvSwitch(action);
    return sendJson(res, 200, engine.kvEvents() ?? { enabled: false });
  }
  if (path === '/_sim/fault' && req.method === 'GET') return sendJson(res, 200, describe());
  if (path === '/_sim/fault' && req.method === 'POST') {
    let fault: Fault;
    try {
      fault = parseFault(await readJsonObject(req));
    } catch (err) {
      if (err instanceof BodyError && err.status === 499) return;
      return sendJson(res, 400, errorBody((err as Error).message, 'BadRequestError', 400));
    }
    if (fault.mode === 'refuse') {
      // answer first, on a connection that closes after this response, then stop listening
      res.on('close', () => {
        engine
          .setFault(fault)
          .catch((err: unknown) => process.stderr.write(`sim ${engine.id}: refuse failed: ${(err as Error).message}\n`));
      });
      return sendJson(res, 200, { ...fault, phase: 'refusing' }, { connection: 'close' });
    }
    await engine.setFault(fault);
    return sendJson(res, 200, describe());
  }
  sendJson(res, 404, { detail: 'Not Found' });
}

/** {"drop": N}, {"restart": true} or {"clear": true}. */
export function parseKvSwitch(body: Record<string, unknown>): SimKvSwitch {
  const keys = Object.keys(body);
  const usage = 'the body must be one of {"drop": N}, {"restart": true}, {"clear": true}';
  if (keys.length !== 1) throw new Error(usage);
  if (keys[0] === 'drop') {
    const n = body.drop;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw new Error(`"drop" must be a whole number >= 0, got ${JSON.stringify(n)}`);
    return { drop: n };
  }
  if (keys[0] === 'restart' && body.restart === true) return { restart: true };
  if (keys[0] === 'clear' && body.clear === true) return { clear: true };
  throw new Error(usage);
}
