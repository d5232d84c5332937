// Client API keys: from flags, env and a file that is re-read when it changes. Keys are compared in constant time
// (both sides hashed to the same length first, so neither the content nor the length of a key leaks).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../util/log.js';

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** One key per line; blank lines and lines starting with # are ignored. */
function parseKeysFile(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('#'));
}

/**
 * The key a client presents: `Authorization: Bearer KEY`, `x-api-key: KEY` (Anthropic-style clients), or HTTP Basic
 * with the key as the password (what a browser sends for the dashboard after asking its user).
 */
export function presentedKey(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m) return m[1];
    const basic = /^Basic\s+([A-Za-z0-9+/]+=*)$/i.exec(auth.trim());
    if (basic) {
      const credentials = Buffer.from(basic[1] as string, 'base64').toString('utf8');
      const colon = credentials.indexOf(':');
      if (colon >= 0 && colon < credentials.length - 1) return credentials.slice(colon + 1);
    }
  }
  const x = headers['x-api-key'];
  return typeof x === 'string' && x.length > 0 ? x : undefined;
}

export class ApiKeys {
  private staticDigests: Buffer[];
  private fileDigests: Buffer[] = [];
  private fileStamp = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    keys: readonly string[],
    private readonly file: string | undefined,
    private readonly log: Logger,
    recheckMs = 2_000,
  ) {
    this.staticDigests = keys.map(digest);
    if (file) {
      this.reload(true);
      this.timer = setInterval(() => this.reload(false), recheckMs);
      this.timer.unref();
    }
  }

  /** True when any key is configured: then every protected request must present one. */
  get enabled(): boolean {
    return this.staticDigests.length > 0 || this.fileDigests.length > 0 || this.file !== undefined;
  }

  /** Constant-time check against every key (no early exit, so timing does not tell which key nearly matched). */
  accepts(key: string | undefined): boolean {
    if (key === undefined) return false;
    const d = digest(key);
    let ok = false;
    for (const k of this.staticDigests) ok = timingSafeEqual(d, k) || ok;
    for (const k of this.fileDigests) ok = timingSafeEqual(d, k) || ok;
    return ok;
  }

  /** True when keys are in use and the request presents none of them. */
  refuses(headers: IncomingHttpHeaders): boolean {
    return this.enabled && !this.accepts(presentedKey(headers));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private reload(first: boolean): void {
    const file = this.file as string;
    let stamp: string;
    try {
      const st = statSync(file);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch (err) {
      if (first) throw new Error(`--api-keys-file ${file}: ${(err as Error).message}`);
      if (this.fileStamp !== 'missing') this.log.warn({ file }, 'API keys file is gone; keeping the keys read last');
      this.fileStamp = 'missing';
      return;
    }
    if (stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    this.fileDigests = parseKeysFile(readFileSync(file, 'utf8')).map(digest);
    this.log.info({ file, keys: this.fileDigests.length }, first ? 'API keys read' : 'API keys file changed; keys re-read');
  }
}
