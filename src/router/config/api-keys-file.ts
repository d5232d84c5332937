// The --api-keys-file: plain lines (one key per line, `#` comments) or a YAML list of entries
// `{key, tenant, priority, max_priority, trusted}` that also say which tenant a key's requests belong to and at which
// priority. Read here for the API-key gate (server/auth.ts) and for the key a replica shows its peers
// (scaling/system.ts). Errors name an entry by its number, line and tenant, never by its key.
import { createHash } from 'node:crypto';
import type { Node } from 'yaml';
import { type FlowIdentity, isPriority, isTenantName, PRIORITY_MAX, PRIORITY_MIN } from '../core/flow.js';
import { lazyModule } from '../util/lazy-module.js';

const yaml = lazyModule<typeof import('yaml')>('yaml');

/** What an accepted API key says of its requests (never the key itself). */
export interface KeyEntry {
  /** the tenant its requests belong to (a trusted key's requests: the fairness id they carry, else this) */
  readonly tenant: string;
  /** the priority of its requests that send none */
  readonly priority: number;
  /** a priority a request asks for above this is lowered to it; PRIORITY_MAX when the entry sets none */
  readonly maxPriority: number;
  /** a gateway's key: its requests' tenant comes from their x-gateway-inference-fairness-id header */
  readonly trusted: boolean;
  /** { tenant, priority }: the flow of its requests that name no other, made once */
  readonly flow: FlowIdentity;
}

/** One key of the file with its entry. */
export interface ApiKey {
  readonly key: string;
  readonly entry: KeyEntry;
}

const FIELDS = ['key', 'tenant', 'priority', 'max_priority', 'trusted'] as const;
const FIELD_SET: ReadonlySet<string> = new Set(FIELDS);

/** The tenant of a key whose entry names none: stable, and telling nothing of the key (`key-` + 8 hex of its SHA-256). */
export function keyTenant(key: string): string {
  return `key-${createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 8)}`;
}

function keyEntry(tenant: string, priority: number, maxPriority: number, trusted: boolean): KeyEntry {
  return { tenant, priority, maxPriority, trusted, flow: Object.freeze({ tenant, priority }) };
}

/** The entry of a key given without one (a plain line, --api-key): its own tenant, priority 0, no cap, not trusted. */
export function plainKeyEntry(key: string): KeyEntry {
  return keyEntry(keyTenant(key), 0, PRIORITY_MAX, false);
}

/** the first line that is neither blank nor a comment */
function firstLine(text: string): string | undefined {
  for (const raw of text.split(/\r?\n/)) {
    const l = raw.trim();
    if (l.length > 0 && !l.startsWith('#')) return l;
  }
  return undefined;
}

/**
 * True when the file is meant as YAML: its first line (blanks and comments aside) starts a list (`- `, `[`), a
 * document (`---`, a `%` directive) or a mapping (`name:`). A key of the plain form starts with none of these, so a
 * YAML file with a mistake is refused rather than read as odd keys.
 */
export function isYamlKeysFile(text: string): boolean {
  const l = firstLine(text);
  if (l === undefined) return false;
  return (
    /^-(\s|$)/.test(l) ||
    l.startsWith('[') ||
    l.startsWith('{') ||
    l.startsWith('---') ||
    l.startsWith('%') ||
    /^[A-Za-z_][\w-]*\s*:(\s|$)/.test(l)
  );
}

/** One key per line; blank lines and lines starting with # are ignored. */
function parsePlain(text: string): ApiKey[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('#'))
    .map((key) => ({ key, entry: plainKeyEntry(key) }));
}

function lineAt(text: string, offset: number | undefined): number {
  if (offset === undefined) return 0;
  let line = 1;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** a field name worth quoting in an error: one that looks like a misspelt field, not like a key put there by mistake */
function quotableField(name: string): string {
  return /^[a-z][a-z_]{0,23}$/.test(name) ? ` ${JSON.stringify(name)}` : '';
}

function entryFromYaml(value: unknown, where: () => string): { key: string; entry: KeyEntry } {
  // `- KEY`: a key with the defaults, as a plain line
  if (typeof value === 'string') value = { key: value };
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Error(`${where()}: an entry is a mapping {key, tenant, priority, max_priority, trusted} or a key`);
  const o = value as Record<string, unknown>;
  for (const name of Object.keys(o))
    if (!FIELD_SET.has(name)) throw new Error(`${where()}: unknown field${quotableField(name)} (the fields are ${FIELDS.join(', ')})`);
  const { key, tenant, priority, max_priority: maxPriority, trusted } = o;
  if (key === undefined || key === null) throw new Error(`${where()}: no key`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a key with a control character cannot be sent in a header
  if (typeof key !== 'string' || key.trim().length === 0 || /[\x00-\x1f\x7f]/.test(key))
    throw new Error(`${where()}: the key must be a non-empty string without control characters (quote a key that YAML reads as a number)`);
  if (tenant !== undefined && (typeof tenant !== 'string' || !isTenantName(tenant)))
    throw new Error(`${where()}: tenant must be 1 to 128 printable ASCII characters, not starting or ending with a space`);
  const range = `an integer from ${PRIORITY_MIN} to ${PRIORITY_MAX}`;
  if (priority !== undefined && !isPriority(priority)) throw new Error(`${where()}: priority must be ${range}`);
  if (maxPriority !== undefined && !isPriority(maxPriority)) throw new Error(`${where()}: max_priority must be ${range}`);
  const p = priority ?? 0;
  const max = maxPriority ?? PRIORITY_MAX;
  if (p > max) throw new Error(`${where()}: priority ${p} is above max_priority ${max}`);
  if (trusted !== undefined && typeof trusted !== 'boolean') throw new Error(`${where()}: trusted must be true or false`);
  const k = key.trim();
  return { key: k, entry: keyEntry(tenant ?? keyTenant(k), p, max, trusted ?? false) };
}

function parseYaml(text: string): ApiKey[] {
  const { isMap, isScalar, isSeq, parseDocument } = yaml();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  const bad = doc.errors[0];
  // the code and the place only: the parser's message may quote the line, which may hold a key
  if (bad) throw new Error(`not valid YAML at line ${lineAt(text, bad.pos[0])} (${bad.code.toLowerCase().replaceAll('_', ' ')})`);
  const seq = doc.contents;
  if (!isSeq(seq)) throw new Error('a YAML keys file is a list of entries: - key: ... (tenant, priority, max_priority, trusted optional)');
  let values: unknown[];
  try {
    values = doc.toJS({ maxAliasCount: 100 }) as unknown[];
  } catch {
    // an alias with no anchor, too many aliases: the message names the alias, which may be a key
    throw new Error('not valid YAML: an alias (*name) with no anchor (&name) before it, or too many aliases');
  }
  const out: ApiKey[] = [];
  const seen = new Map<string, number>();
  seq.items.forEach((node, i) => {
    const where = (): string => {
      const n = node as Node | null;
      const tenantNode = isMap(n) ? n.get('tenant', true) : undefined;
      const tenant =
        isScalar(tenantNode) && typeof tenantNode.value === 'string' && isTenantName(tenantNode.value)
          ? ` (tenant ${JSON.stringify(tenantNode.value)})`
          : '';
      return `entry ${i + 1} at line ${lineAt(text, n?.range?.[0])}${tenant}`;
    };
    const k = entryFromYaml(values[i], where);
    const before = seen.get(k.key);
    if (before !== undefined) throw new Error(`${where()}: the same key as entry ${before + 1}`);
    seen.set(k.key, i);
    out.push(k);
  });
  return out;
}

/** The file's keys with their entries; throws an Error naming the entry that is wrong (never its key). */
export function parseApiKeysFile(text: string): ApiKey[] {
  return isYamlKeysFile(text) ? parseYaml(text) : parsePlain(text);
}
