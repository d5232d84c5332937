// The piece cache (src/router/kv/token-cache.ts) against whole tokenizations, on texts fast-check makes: fragments of
// prose, whitespace, digits, non-Latin text and special tokens in any order, each text then extended (a next turn)
// so that reuse happens, with and without the special tokens a prompt gets.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { RequestTokenizer } from '../../src/router/kv/request-tokens.js';
import { SegmentedEncoder } from '../../src/router/kv/token-cache.js';
import { conversation } from '../support/conversations.js';

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

test('sliced (asynchronous) encoding equals a whole tokenization too, whatever the slice size', async () => {
  const enc = new SegmentedEncoder(hf, 4 * 1024 * 1024);
  await fc.assert(
    fc.asyncProperty(text, text, fc.boolean(), fc.integer({ min: 1, max: 64 }), async (base, more, special, slice) => {
      for (const t of [base, base + more]) {
        const { ids } = await enc.encodeAsync(t, special, slice);
        assert.deepEqual(Array.from(ids), hf.encode(t, special), JSON.stringify(t));
      }
    }),
    { numRuns: 200, seed: 20261203 },
  );
});

test('path mode serves the event loop while it tokenizes a long new conversation, and reuses it the next turn', async () => {
  const rt = new RequestTokenizer({ mode: DIR, sliceChars: 2048, timeoutMs: 30_000 });
  after(() => rt.close());
  const messages = conversation(77, 12, 120);
  const body = { model: 'm', messages };
  let done = false;
  let turnsOfLoop = 0;
  const spin = (): void => {
    if (done) return;
    turnsOfLoop++;
    setImmediate(spin);
  };
  const pending = rt.tokenize('m', body).finally(() => {
    done = true;
  });
  setImmediate(spin);
  const out = await pending;
  const whole = hf.encode(hf.renderChat(messages), false);
  assert.ok(whole.length > 3000, `${whole.length} tokens`);
  assert.deepEqual(Array.from(out.tokens ?? []), whole);
  assert.equal(out.cached, false);
  // a 40 KB text in slices of 2 KB: the loop turned between them
  assert.ok(turnsOfLoop >= 5, `the event loop turned ${turnsOfLoop} times`);
  const next = [...messages, { role: 'user', content: 'And then?' }];
  const again = await rt.tokenize('m', { model: 'm', messages: next });
  assert.equal(again.cached, true);
  assert.deepEqual(Array.from(again.tokens ?? []), hf.encode(hf.renderChat(next), false));
});

test('a text whose uncached part fits one slice is tokenized without a pause (a next turn waits for no loop turn)', async () => {
  const enc = new SegmentedEncoder(hf, 4 * 1024 * 1024);
  const base = '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>';
  const next = `${base}<|start_header_id|>assistant<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`;
  await enc.encodeAsync(base, false, 8192);
  let turns = 0;
  let done = false;
  const spin = (): void => {
    if (done) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  // the spinner's first turn comes before any pause the encoding takes; the pause would add another
  const out = await enc.encodeAsync(next, false, 8192).finally(() => {
    done = true;
  });
  assert.deepEqual(Array.from(out.ids), hf.encode(next, false));
  assert.equal(out.reusedChars, base.length);
  assert.equal(turns, 0);
});

test('an encoding resumed from an earlier text it starts with equals a whole tokenization, and leaves a point of its own', async () => {
  const enc = new SegmentedEncoder(hf, 4 * 1024 * 1024);
  const fresh = new SegmentedEncoder(hf, 4 * 1024 * 1024);
  await fc.assert(
    fc.asyncProperty(text, text, text, fc.boolean(), async (a, b, c, special) => {
      // the first text remembers a point at the end of `a` (the last piece end at or before it)
      const first = await enc.encodeAsync(a + b, special, 8192, { keepAt: a.length });
      assert.deepEqual(Array.from(first.ids), hf.encode(a + b, special));
      if (first.resume === undefined) return;
      assert.ok(first.resume.chars <= a.length);
      assert.deepEqual(Array.from(first.resume.ids), hf.encode((a + b).slice(0, first.resume.chars), false));
      // a text that starts with `a` resumes there; the same ids as a whole tokenization, and as a cold encoder's
      const next = a + c;
      const second = await enc.encodeAsync(next, special, 8192, { resume: first.resume, keepAt: next.length });
      assert.deepEqual(Array.from(second.ids), hf.encode(next, special), JSON.stringify(next));
      assert.deepEqual(Array.from(second.ids), Array.from((await fresh.encodeAsync(next, special)).ids));
      assert.ok(second.reusedChars >= first.resume.chars);
    }),
    { numRuns: 300, seed: 20261204 },
  );
});
