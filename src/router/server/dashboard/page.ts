// The dashboard's page: three static files shipped with the router (web/dashboard: HTML, vanilla JS, CSS), read once at
// start. Its content security policy lets it load nothing but itself and its /events stream: no CDN, no fonts, no
// inline script, and no frame can embed it.
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';

const WEB_DIR = fileURLToPath(new URL('../../../../web/dashboard/', import.meta.url));

const POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

/** path under the router -> file in web/dashboard; the page names the others relative to itself */
const FILES: Readonly<Record<string, { file: string; type: string }>> = {
  '/dashboard': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

export class DashboardPage {
  private readonly assets = new Map<string, Asset>();

  constructor(dir = WEB_DIR) {
    for (const [path, { file, type }] of Object.entries(FILES)) this.assets.set(path, { body: readFileSync(dir + file), type });
  }

  get paths(): string[] {
    return [...this.assets.keys()];
  }

  /** /dashboard/ (typed often) would resolve the page's relative links one level too deep: it moves to /dashboard */
  static redirectFromSlash(res: ServerResponse): void {
    // relative, so that it holds behind a proxy that serves the router under a path prefix
    res.writeHead(301, { location: '../dashboard', 'content-length': 0 });
    res.end();
  }

  serve(res: ServerResponse, path: string): void {
    const asset = this.assets.get(path) as Asset;
    res.writeHead(200, {
      'content-type': asset.type,
      'content-length': asset.body.length,
      'cache-control': 'no-cache',
      'content-security-policy': POLICY,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    });
    res.end(asset.body);
  }
}
