// The simulator's tokenizer: stable word-level ids, the prompt of every body shape, the sim's chat template.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { promptOf, renderChat, WORD_VOCAB_SIZE, WordTokenizer } from '../../src/tools/sim/tokenizer.js';
import { countTokens } from '../../src/tools/sim/tokens.js';

test('words and punctuation marks are one token each, with ids that are the same in every tokenizer', () => {
  const a = new WordTokenizer();
  const b = new WordTokenizer();
  const ids = a.encode('Hello, world! Hello again.');
  assert.equal(ids.length, 7);
  // the same word, the same id; another word (or case), another id
  assert.equal(ids[0], ids[4]);
  assert.equal(ids[1] === ids[3], false);
  assert.notEqual(a.encode('Hello')[0], a.encode('hello')[0]);
  assert.deepEqual(b.encode('Hello, world! Hello again.'), ids);
  for (const id of ids) assert.ok(Number.isInteger(id) && id >= 0 && id < WORD_VOCAB_SIZE, `id ${id}`);
  // ids are spread over the vocabulary, not numbered 1..n as /tokenize used to answer
  assert.ok(Math.max(...a.encode('alpha beta gamma delta epsilon')) > 100);
  const text = 'It costs $3.50 (tax incl.)\n\tnext   line: done; a_b';
  assert.equal(a.encode(text).length, countTokens(text));
  assert.deepEqual(a.encode(''), []);
});

test('a body’s prompt: chat messages through the template, prompt or input text, or the token ids given', () => {
  const t = new WordTokenizer();
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'image_url' }] },
  ];
  assert.equal(renderChat([{ role: 'user', content: 'x' }], true), 'user\nx\nassistant\n');
  assert.equal(renderChat([{ role: 'user', content: 'x' }], false), 'user\nx\n');
  assert.deepEqual(t.encodeBody({ messages }), t.encode('system\nBe brief.\nuser\nHi\nassistant\n'));
  // add_generation_prompt: false leaves the assistant turn unopened
  assert.deepEqual(t.encodeBody({ messages, add_generation_prompt: false }), t.encode('system\nBe brief.\nuser\nHi\n'));
  // an Anthropic-style top-level system prompt is the first message
  assert.deepEqual(t.encodeBody({ system: 'S', messages: [{ role: 'user', content: 'U' }] }), t.encode('system S user U assistant'));
  assert.deepEqual(t.encodeBody({ prompt: 'one two' }), t.encode('one two'));
  assert.deepEqual(t.encodeBody({ prompt: ['first prompt', 'second'] }), t.encode('first prompt'));
  assert.deepEqual(t.encodeBody({ input: 'embed me' }), t.encode('embed me'));
  assert.deepEqual(t.encodeBody({ prompt: [5, 6, 70000] }), [5, 6, 70000]);
  assert.deepEqual(t.encodeBody({ prompt: [[9, 8], [7]] }), [9, 8]);
  assert.deepEqual(t.encodeBody({}), []);
  assert.deepEqual(promptOf({ messages: [{ role: 'user', content: 'q' }] }), {
    kind: 'chat',
    messages: [{ role: 'user', content: 'q' }],
    addGenerationPrompt: true,
  });
});
