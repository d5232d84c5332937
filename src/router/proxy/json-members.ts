// The top-level members of a JSON object body, found by one scan of its bytes, and edits that replace, add or remove
// members while every other byte stays as the client sent it (spacing, key order, escapes, even invalid UTF-8 inside
// strings). The body has been validated by JSON.parse already. The scan reads the bytes as latin1 (one char per byte:
// JSON's structure is ASCII, and UTF-8 continuation bytes never look like '"' or '\\'), so string offsets are byte
// offsets. Duplicate keys follow JSON.parse: the last one is the value, so that is the one replaced or read.

interface Member {
  readonly key: string;
  /** the key's opening quote */
  readonly start: number;
  readonly valueStart: number;
  /** just past the value */
  readonly valueEnd: number;
}

interface ObjectShape {
  /** index of '{' */
  readonly open: number;
  readonly members: readonly Member[];
}

/** One change: `value` (raw JSON text) replaces the member's value or is appended; undefined removes every member of that name. */
export interface MemberEdit {
  readonly key: string;
  readonly value: string | Buffer | undefined;
  /** replace only: a member that is absent is not added */
  readonly ifPresent?: boolean;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Index just past the JSON string starting at `start` (which is a quote). */
function skipString(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i += 2;
    else if (c === 0x22) return i + 1;
    else i++;
  }
  return i;
}

/** Index just past the JSON value starting at `start`. */
function skipValue(text: string, start: number): number {
  const first = text.charCodeAt(start);
  if (first === 0x22) return skipString(text, start);
  if (first === 0x7b || first === 0x5b) {
    let depth = 0;
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x22) i = skipString(text, i) - 1;
      else if (c === 0x7b || c === 0x5b) depth++;
      else if ((c === 0x7d || c === 0x5d) && --depth === 0) return i + 1;
    }
    return text.length;
  }
  // a number, true, false or null: up to the next separator
  let i = start;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) break;
    i++;
  }
  return i;
}

function keyOf(text: string, start: number, end: number): string {
  const raw = text.slice(start, end);
  return raw.includes('\\') ? (JSON.parse(Buffer.from(raw, 'latin1').toString('utf8')) as string) : raw.slice(1, -1);
}

/** The members of the top-level object, or undefined when the text is not one. */
function scanObject(text: string): ObjectShape | undefined {
  const open = skipSpace(text, 0);
  if (text.charCodeAt(open) !== 0x7b) return undefined;
  const members: Member[] = [];
  let i = skipSpace(text, open + 1);
  if (text.charCodeAt(i) === 0x7d) return { open, members };
  while (i < text.length) {
    if (text.charCodeAt(i) !== 0x22) return undefined;
    const keyEnd = skipString(text, i);
    let j = skipSpace(text, keyEnd);
    if (text.charCodeAt(j) !== 0x3a) return undefined;
    j = skipSpace(text, j + 1);
    const valueEnd = skipValue(text, j);
    members.push({ key: keyOf(text, i, keyEnd), start: i, valueStart: j, valueEnd });
    i = skipSpace(text, valueEnd);
    const c = text.charCodeAt(i);
    if (c === 0x7d) return { open, members };
    if (c !== 0x2c) return undefined;
    i = skipSpace(text, i + 1);
  }
  return undefined;
}

/** The raw bytes of the (last) top-level member named `key`; undefined when absent or the body is not an object. */
export function memberValue(body: Buffer, key: string): Buffer | undefined {
  const shape = scanObject(body.toString('latin1'));
  if (!shape) return undefined;
  for (let i = shape.members.length - 1; i >= 0; i--) {
    const m = shape.members[i] as Member;
    if (m.key === key) return body.subarray(m.valueStart, m.valueEnd);
  }
  return undefined;
}

interface Splice {
  readonly start: number;
  readonly end: number;
  readonly insert: Buffer | undefined;
}

/**
 * Applies the edits to a JSON object body: replaced values take the place of the old value's bytes, removed members
 * take one separating comma with them, added members go after the last member that stays. A body that is not a JSON
 * object comes back unchanged.
 */
export function editMembers(body: Buffer, edits: readonly MemberEdit[]): Buffer {
  const shape = scanObject(body.toString('latin1'));
  if (!shape) return body;
  const { members } = shape;
  const byKey = new Map<string, MemberEdit>();
  for (const e of edits) byKey.set(e.key, e);
  const removed = members.map((m) => byKey.has(m.key) && byKey.get(m.key)?.value === undefined);
  const lastOf = new Map<string, number>();
  for (const [i, m] of members.entries()) lastOf.set(m.key, i);
  const firstKept = removed.indexOf(false);
  const lastKept = removed.lastIndexOf(false);
  const splices: Splice[] = [];
  members.forEach((m, i) => {
    if (removed[i]) {
      if (firstKept < 0) {
        // nothing stays: every member goes, with the separators between them
        if (i === 0) splices.push({ start: m.start, end: (members.at(-1) as Member).valueEnd, insert: undefined });
      } else if (i < firstKept) {
        // leading members go with the comma after them, up to the first one that stays
        if (i === 0) splices.push({ start: m.start, end: (members[firstKept] as Member).start, insert: undefined });
      } else {
        // later ones with the comma before them, from the end of the previous value
        splices.push({ start: (members[i - 1] as Member).valueEnd, end: m.valueEnd, insert: undefined });
      }
      return;
    }
    const edit = byKey.get(m.key);
    if (edit?.value !== undefined && lastOf.get(m.key) === i)
      splices.push({ start: m.valueStart, end: m.valueEnd, insert: toBuffer(edit.value) });
  });
  const added: Buffer[] = [];
  for (const e of byKey.values()) {
    if (e.value === undefined || e.ifPresent || lastOf.has(e.key)) continue;
    const member = `${JSON.stringify(e.key)}:`;
    added.push(Buffer.from(added.length > 0 || lastKept >= 0 ? `,${member}` : member, 'utf8'), toBuffer(e.value));
  }
  if (added.length > 0) {
    const at = lastKept >= 0 ? (members[lastKept] as Member).valueEnd : shape.open + 1;
    splices.push({ start: at, end: at, insert: Buffer.concat(added) });
  }
  if (splices.length === 0) return body;
  // in body order; an insertion sorts before a removal that starts where it is inserted
  splices.sort((a, b) => a.start - b.start || a.end - b.end);
  const parts: Buffer[] = [];
  let cursor = 0;
  for (const s of splices) {
    parts.push(body.subarray(cursor, s.start));
    if (s.insert) parts.push(s.insert);
    cursor = s.end;
  }
  parts.push(body.subarray(cursor));
  return Buffer.concat(parts);
}

function toBuffer(value: string | Buffer): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}
