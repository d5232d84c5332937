// The nesting scan that runs before JSON.parse (src/router/util/json-depth.ts), held against JSON.parse on valid JSON
// of every shape fast-check makes (strings full of brackets, quotes, backslashes and non-ASCII text included), and the
// parse stage's refusal of a body nested deeper than the bound (400 invalid_json) before it parses it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { jsonDepth, MAX_JSON_DEPTH } from '../../src/router/util/json-depth.js';
import { parseInference } from '../../src/router/server/pipeline.js';

/** The depth of a parsed value: 0 for a scalar, 1 + its deepest member for an array or object. */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((m: number, x) => Math.max(m, depthOf(x)), 0);
  if (typeof v === 'object' && v !== null) return 1 + Object.values(v).reduce((m: number, x) => Math.max(m, depthOf(x)), 0);
  return 0;
}

// strings made to confuse a scan: brackets, quotes, backslashes, escapes of every kind, multi-byte characters
const tricky = fc.string({
  unit: fc.oneof(
    fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\"', '\\\\', ',', ':', '\n', '\u2028', 'é', '東', '🙂', '\u0000'),
    fc.string(),
  ),
});
const value = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tricky,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('node')),
    fc.dictionary(tricky, tie('node')),
  ),
})).node;

test('on valid JSON the scan gives the depth JSON.parse builds, whatever the strings hold and however it is spaced', () => {
  fc.assert(
    fc.property(value, fc.constantFrom(undefined, 1, '\t'), (v, space) => {
      const text = JSON.stringify(v, null, space);
      const bytes = Buffer.from(text, 'utf8');
      assert.equal(jsonDepth(bytes), depthOf(JSON.parse(text)), text);
    }),
    { numRuns: 1000, seed: 20261205 },
  );
  // fast-check's own JSON texts, unicode strings included
  fc.assert(
    fc.property(fc.json({ depthSize: 'medium' }), (text) => {
      assert.equal(jsonDepth(Buffer.from(text, 'utf8')), depthOf(JSON.parse(text)), text);
    }),
    { numRuns: 1000, seed: 20261206 },
  );
});

test('the scan stops one level past its bound, and stops at once on a body that is all brackets', () => {
  assert.equal(jsonDepth(Buffer.from('[[[[1]]]]'), 2), 3);
  assert.equal(jsonDepth(Buffer.from('[[[[1]]]]')), 4);
  assert.equal(jsonDepth(Buffer.from('"[[[["')), 0);
  assert.equal(jsonDepth(Buffer.from('{"a\\"[": [{"b": "\\\\"}, "]]]"]}')), 3);
  // counted, not timed: the scan reads the first bound + 1 bytes of 4 MB of brackets and no more
  const huge = Buffer.from('['.repeat(2 * 1024 * 1024) + ']'.repeat(2 * 1024 * 1024));
  let reads = 0;
  const counted = new Proxy(huge, {
    get(target, key) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  assert.equal(jsonDepth(counted, MAX_JSON_DEPTH), MAX_JSON_DEPTH + 1);
  assert.equal(reads, MAX_JSON_DEPTH + 1);
});

test('the parse stage refuses nesting past the bound with invalid_json, before parsing; the bound itself is fine', () => {
  const body = (depth: number): Buffer =>
    Buffer.from(`{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`);
  const ok = parseInference(body(MAX_JSON_DEPTH));
  assert.equal(ok.ok, true);
  const deep = parseInference(body(MAX_JSON_DEPTH + 1));
  assert.equal(deep.ok, false);
  assert.ok(!deep.ok && deep.error.status === 400 && deep.error.code === 'invalid_json', JSON.stringify(deep));
  assert.match(!deep.ok ? deep.error.message : '', /deeper than 128 levels/);
  // 4 MB of nested arrays: refused without building them (JSON.parse is never called; counted, not timed)
  const parse = JSON.parse;
  let parses = 0;
  JSON.parse = (...args: Parameters<typeof JSON.parse>): unknown => {
    parses++;
    return parse(...args);
  };
  try {
    const nested = parseInference(Buffer.from(`{"model": "m", "x": ${'['.repeat(2_000_000)}${']'.repeat(2_000_000)}}`));
    assert.ok(!nested.ok && nested.error.code === 'invalid_json');
    assert.equal(parses, 0);
    assert.equal(parseInference(body(MAX_JSON_DEPTH)).ok, true);
    assert.equal(parses, 1, 'the spy sees the parse of a body within the bound');
  } finally {
    JSON.parse = parse;
  }
});
