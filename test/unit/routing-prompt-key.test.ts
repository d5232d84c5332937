// The prefix key: which part of a prompt decides where prefixaware sends it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PREFIX_BOUNDARIES, promptPrefixKey } from '../../src/router/routing/prompt-key.js';

const B = 16;
const key = (prompt: unknown, block = B): number | undefined => promptPrefixKey({ model: 'm', prompt }, block);

/** The prompt length the key covers: the longest boundary the prompt reaches, or all of a prompt shorter than a block. */
function covered(length: number, block = B): number {
  let c = length < block ? length : 0;
  for (const n of PREFIX_BOUNDARIES) if (n * block <= length) c = n * block;
  return c;
}

test('a prompt shorter than one block is one block: all of it counts', () => {
  assert.notEqual(key('hi there'), key('hi therE'));
  assert.equal(key('hi there'), key('hi there'));
  assert.notEqual(key('hi'), key('hi there'));
});

test('only the prefix up to the longest boundary reached counts (1, 2, 4, 8 blocks)', () => {
  const text = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(8); // 288 chars, 18 blocks of 16
  // 40 chars reach boundary 2 (32): anything after char 32 is ignored until the prompt reaches 64
  assert.equal(key(text.slice(0, 40)), key(text.slice(0, 32) + 'X'.repeat(8)));
  assert.equal(key(text.slice(0, 40)), key(text.slice(0, 63)));
  assert.notEqual(key(text.slice(0, 63)), key(text.slice(0, 64)));
  // past 8 blocks (128) nothing more is read
  assert.equal(key(text.slice(0, 128)), key(text));
  assert.equal(key(text), key(text.slice(0, 128) + 'a different tail entirely'));
  // and a change inside the first block always matters
  assert.notEqual(key(text), key('A' + text.slice(1)));
});

test('prompts agreeing up to the boundary they both reach share the key (property)', () => {
  fc.assert(
    fc.property(fc.string({ minLength: 1, maxLength: 200 }), fc.string({ maxLength: 200 }), (base, tail) => {
      const longer = base + tail;
      if (covered(base.length) === covered(longer.length)) assert.equal(key(base), key(longer));
      assert.equal(key(base), key(base.slice(0, covered(base.length)) + base.slice(covered(base.length))));
    }),
    { numRuns: 300 },
  );
});

test('words that differ after the first block still change the key', () => {
  const head = 'x'.repeat(B);
  const variants = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'].map((w) => `${head}${w} ${'y'.repeat(B)}`);
  assert.equal(new Set(variants.map((v) => key(v))).size, variants.length);
});

test('chat messages count in order with their roles; content parts, tool calls and Anthropic system prompts are read', () => {
  const chat = (messages: unknown[], extra: Record<string, unknown> = {}): number | undefined =>
    promptPrefixKey({ model: 'm', messages, ...extra }, 256);
  const sys = { role: 'system', content: 'Be brief.' };
  const user = { role: 'user', content: 'Hello' };
  assert.equal(
    chat([sys, user]),
    chat([
      sys,
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Hel' },
          { type: 'text', text: 'lo' },
        ],
      },
    ]),
    'text parts read as one text',
  );
  assert.notEqual(chat([sys, user]), chat([user, sys]));
  assert.notEqual(chat([sys, user]), chat([sys, { role: 'assistant', content: 'Hello' }]));
  assert.notEqual(chat([user]), chat([user], { system: 'You are terse.' }));
  const call = (args: string): unknown => ({
    role: 'assistant',
    content: null,
    tool_calls: [{ type: 'function', function: { name: 'lookup', arguments: args } }],
  });
  assert.notEqual(chat([user, call('{"q":1}')]), chat([user, call('{"q":2}')]));
  const image = (url: string): unknown => ({ role: 'user', content: [{ type: 'image_url', image_url: { url } }] });
  assert.notEqual(chat([image('http://a/1.png')]), chat([image('http://a/2.png')]));
});

test('completions: a string, a batch (its first prompt) or token ids; no prompt gives no key', () => {
  assert.equal(key(['first prompt', 'second']), key('first prompt'));
  assert.notEqual(key([1, 2, 3]), key([1, 2, 4]));
  assert.equal(key([[1, 2, 3], [4]]), key([1, 2, 3]));
  assert.equal(key(''), undefined);
  assert.equal(key([]), undefined);
  assert.equal(promptPrefixKey({ model: 'm' }, 256), undefined);
  assert.equal(promptPrefixKey({ model: 'm', messages: [] }, 256), undefined);
  assert.notEqual(promptPrefixKey({ model: 'm', input: 'embed me' }, 256), undefined);
});
