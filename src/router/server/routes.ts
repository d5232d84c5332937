// The route table: method + path to handler, 404/405 answers, and the API-key gate for protected routes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiKeys } from './auth.js';
import { errors, sendError } from './errors.js';

export type Handler = (req: IncomingMessage, res: ServerResponse, path: string) => void | Promise<void>;

export interface Route {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly handler: Handler;
  /** reachable without an API key (liveness and readiness probes) */
  readonly public?: boolean;
  /** opened in a browser (the dashboard): a 401 asks the browser for the key (HTTP Basic, the key as password) */
  readonly browser?: boolean;
}

export function createRequestListener(
  routes: readonly Route[],
  opts: { keys: ApiKeys | undefined; onError: (res: ServerResponse, err: unknown) => void },
): (req: IncomingMessage, res: ServerResponse) => void {
  const table = new Map<string, Route>();
  const methods = new Map<string, string[]>();
  for (const r of routes) {
    table.set(`${r.method} ${r.path}`, r);
    methods.set(r.path, [...(methods.get(r.path) ?? []), r.method]);
  }
  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    // HEAD is GET without the body (node:http drops the body of a HEAD answer)
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
    const route = table.get(`${method} ${path}`);
    if (!route) {
      req.resume();
      const allowed = methods.get(path);
      return sendError(res, allowed ? errors.methodNotAllowed(req.method ?? '', path, allowed.join(', ')) : errors.notFound(path));
    }
    if (!route.public && opts.keys?.refusesRequest(req)) {
      req.resume();
      return sendError(res, errors.invalidApiKey(route.browser ? 'basic' : 'bearer'));
    }
    try {
      const done = route.handler(req, res, path);
      if (done) done.catch((err: unknown) => opts.onError(res, err));
    } catch (err) {
      opts.onError(res, err);
    }
  };
}
