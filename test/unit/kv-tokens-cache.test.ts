// The piece cache (src/router/kv/token-cache.ts) against whole tokenizations, on texts fast-check makes: fragments of
// prose, whitespace, digits, non-Latin text and special tokens in any order, each text then extended (a next turn)
// so that reuse happens, with and without the special tokens a prompt gets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { SegmentedEncoder } from '../../src/router/kv/token-cache.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const hf = await HfTokenizer.load(DIR);

const fragment = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom('<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<|begin_of_text|>', '<|python_tag|>'),
  },
  { weight: 3, arbitrary: fc.constantFrom('Hello', ' world', 'the', ' router', "'s", "n't", ' 1234', '56', '東京', ' 🙂', 'é', '.', '!') },
  { weight: 2, arbitrary: fc.constantFrom(' ', '  ', '\n', '\n\n', '\t', ' \n ', '\r\n') },
  { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
  { weight: 1, arbitrary: fc.constantFrom('<|eot', '_id|>', '<|', '|>') },
);
const text = fc.array(fragment, { maxLength: 40 }).map((parts) => parts.join(''));

test('cached pieces joined equal a whole tokenization, for any text and any extension of it', () => {
  const enc = new SegmentedEncoder(hf, 4 * 1024 * 1024);
  let reused = 0;
  fc.assert(
    fc.property(text, text, fc.boolean(), (base, more, special) => {
      for (const t of [base, base + more]) {
        assert.deepEqual(Array.from(enc.encode(t, special)), hf.encode(t, special), JSON.stringify(t));
        if (enc.stats.reusedChars > 0) reused++;
      }
    }),
    { numRuns: 400, seed: 20261202 },
  );
  assert.ok(reused > 100, `only ${reused} encodings reused a piece`);
});
