// How deeply a JSON text nests, read from its bytes before any parser builds it: a linear scan that counts `[` and `{`
// outside strings (a string ends at a `"` not escaped by a backslash). On valid JSON it agrees with the parsed value's
// depth; on anything else it reads no deeper than a parser would get before refusing it, since both see the same
// strings up to the first error. The bound lets a caller refuse a body that would cost the parser (and every walk over
// the parsed value) far more than its size suggests.

/** the deepest nesting of JSON request bodies the router parses (serde_json's default recursion limit) */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * The deepest nesting of arrays and objects in `bytes` (UTF-8 JSON; 0 for a scalar), or `stopAbove + 1` as soon as it
 * goes deeper than `stopAbove`.
 */
export function jsonDepth(bytes: Uint8Array, stopAbove = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let deepest = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const c = bytes[i] as number;
    if (c === QUOTE) {
      // to the string's closing quote: a backslash escapes the byte after it (a multi-byte character never holds one)
      for (i++; i < n; i++) {
        const s = bytes[i] as number;
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > stopAbove) return deepest;
      }
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return deepest;
}
