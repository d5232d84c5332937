// Client API keys: from flags, env and a file that is re-read when it changes (plain lines or YAML entries that also
// name each key's tenant and priority: config/api-keys-file.ts). Keys are compared in constant time
// (both sides hashed to the same length first, so neither the content nor the length of a key leaks).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { type ApiKey, type KeyEntry, parseApiKeysFile, plainKeyEntry } from '../config/api-keys-file.js';
import { StartupError } from '../core/startup-error.js';
import type { Logger } from '../util/log.js';

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** A configured key as the gate holds it: its digest, and its entry under the digest's bytes. */
interface HeldKey {
  readonly digest: Buffer;
  readonly entry: KeyEntry;
}

function hold(k: ApiKey): HeldKey {
  return { digest: digest(k.key), entry: k.entry };
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
  private readonly staticKeys: readonly HeldKey[];
  private fileKeys: readonly HeldKey[] = [];
  /** digest (latin1) -> entry; a key in the file and in --api-key has the file's entry */
  private entries = new Map<string, KeyEntry>();
  private tenantSet: ReadonlySet<string> = new Set();
  private fileStamp = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    keys: readonly string[],
    private readonly file: string | undefined,
    private readonly log: Logger,
    recheckMs = 2_000,
  ) {
    this.staticKeys = keys.map((key) => hold({ key, entry: plainKeyEntry(key) }));
    this.index();
    if (file) {
      this.reload(true);
      this.timer = setInterval(() => this.recheck(), recheckMs);
      this.timer.unref();
    }
  }

  /** requests admitted by refusesRequest(), with their key's entry (gone with the request) */
  private readonly checked = new WeakMap<object, KeyEntry>();

  /** True when any key is configured: then every protected request must present one. */
  get enabled(): boolean {
    return this.staticKeys.length > 0 || this.fileKeys.length > 0 || this.file !== undefined;
  }

  /** The tenants of the configured keys (those the flow controller may name in its metrics). */
  get tenants(): ReadonlySet<string> {
    return this.tenantSet;
  }

  /** Constant-time check against every key (no early exit, so timing does not tell which key nearly matched). */
  accepts(key: string | undefined): boolean {
    return key !== undefined && this.matches(digest(key));
  }

  /**
   * The entry of the configured key the request presents, found after the constant-time check by the key's digest;
   * undefined when it presents none of them (or no keys are in use). `refuses` in one call that also gives the entry.
   */
  entryOf(headers: IncomingHttpHeaders): KeyEntry | undefined {
    const key = presentedKey(headers);
    if (key === undefined) return undefined;
    const d = digest(key);
    return this.matches(d) ? this.entries.get(d.toString('latin1')) : undefined;
  }

  /** True when keys are in use and the request presents none of them. */
  refuses(headers: IncomingHttpHeaders): boolean {
    return this.enabled && !this.accepts(presentedKey(headers));
  }

  /**
   * refuses() for a request whose key's entry is read again later (flow control's tenant and priority): the entry
   * found by the one constant-time check is kept for entryFor(), so the request pays for one digest and one loop.
   */
  refusesRequest(req: { readonly headers: IncomingHttpHeaders }): boolean {
    if (!this.enabled) return false;
    const entry = this.entryOf(req.headers);
    if (entry === undefined) return true;
    this.checked.set(req, entry);
    return false;
  }

  /** The entry of the key a request admitted by refusesRequest() presented (found again if it was not checked there). */
  entryFor(req: { readonly headers: IncomingHttpHeaders }): KeyEntry | undefined {
    if (!this.enabled) return undefined;
    return this.checked.get(req) ?? this.entryOf(req.headers);
  }

  /** Re-reads the file when it changed (every `recheckMs`); a file gone or not valid keeps the keys read last. */
  recheck(): void {
    if (this.file) this.reload(false);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private matches(d: Buffer): boolean {
    let ok = false;
    for (const k of this.staticKeys) ok = timingSafeEqual(d, k.digest) || ok;
    for (const k of this.fileKeys) ok = timingSafeEqual(d, k.digest) || ok;
    return ok;
  }

  private index(): void {
    const entries = new Map<string, KeyEntry>();
    for (const k of this.staticKeys) entries.set(k.digest.toString('latin1'), k.entry);
    for (const k of this.fileKeys) entries.set(k.digest.toString('latin1'), k.entry);
    this.entries = entries;
    this.tenantSet = new Set([...entries.values()].map((e) => e.tenant));
  }

  private reload(first: boolean): void {
    const file = this.file as string;
    let stamp: string;
    try {
      const st = statSync(file);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch (err) {
      if (first) throw new StartupError(`--api-keys-file ${file}: ${(err as Error).message}`);
      if (this.fileStamp !== 'missing') this.log.warn({ file }, 'API keys file is gone; keeping the keys read last');
      this.fileStamp = 'missing';
      return;
    }
    if (stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    let keys: ApiKey[];
    try {
      keys = parseApiKeysFile(readFileSync(file, 'utf8'));
    } catch (err) {
      // a file the router cannot run with: exit 2, as for a bad flag
      if (first) throw new StartupError(`--api-keys-file ${file}: ${(err as Error).message}`, 2);
      this.log.warn({ file, error: (err as Error).message }, 'API keys file is not valid; keeping the keys read last');
      return;
    }
    this.fileKeys = keys.map(hold);
    this.index();
    this.log.info({ file, keys: this.fileKeys.length }, first ? 'API keys read' : 'API keys file changed; keys re-read');
  }
}
