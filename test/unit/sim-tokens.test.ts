import { test } from 'node:test';
import assert from 'node:assert/strict';
import { countTokens, fillerText, fillerToken, outputBudget, promptTokens, tokensOf } from '../../src/tools/sim/tokens.js';
import { FaultError, parseFault } from '../../src/tools/sim/faults.js';

test('words and punctuation marks count as one token each', () => {
  assert.equal(countTokens(''), 0);
  assert.equal(countTokens('hello world'), 2);
  assert.equal(countTokens('Hello, world!'), 4);
  assert.equal(countTokens('  spaced   out  '), 2);
});

test('prompt tokens come from chat messages, prompts, inputs and token ids', () => {
  assert.equal(
    promptTokens({
      messages: [
        { role: 'user', content: 'one two' },
        { role: 'assistant', content: 'three' },
      ],
    }),
    3,
  );
  assert.equal(
    promptTokens({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a b c' },
            { type: 'image_url', image_url: { url: 'x' } },
          ],
        },
      ],
    }),
    3,
  );
  assert.equal(promptTokens({ prompt: 'four five six seven' }), 4);
  assert.equal(promptTokens({ prompt: [1, 2, 3] }), 3);
  assert.equal(promptTokens({ input: ['a', 'b c'] }), 3);
  assert.equal(promptTokens({ query: 'q', documents: ['d1 d2', 'd3'] }), 4);
  assert.equal(promptTokens({ model: 'm', temperature: 0.5 }), 0);
  assert.equal(tokensOf(null), 0);
});

test("a request's max_tokens lowers the engine's output length and makes the finish reason 'length'", () => {
  assert.deepEqual(outputBudget({}, 16), { tokens: 16, finishReason: 'stop' });
  assert.deepEqual(outputBudget({ max_tokens: 4 }, 16), { tokens: 4, finishReason: 'length' });
  assert.deepEqual(outputBudget({ max_completion_tokens: 3, max_tokens: 10 }, 16), { tokens: 3, finishReason: 'length' });
  assert.deepEqual(outputBudget({ max_tokens: 100 }, 16), { tokens: 16, finishReason: 'stop' });
  assert.deepEqual(outputBudget({ max_tokens: 0 }, 16), { tokens: 1, finishReason: 'length' });
  assert.deepEqual(outputBudget({ max_tokens: 'many' }, 16), { tokens: 16, finishReason: 'stop' });
});

test('filler tokens concatenate into deterministic text whose length matches the token count', () => {
  assert.equal(fillerToken(0), 'The');
  assert.equal(fillerToken(1), ' quick');
  assert.equal(fillerText(3), 'The quick brown');
  assert.equal(countTokens(fillerText(40)), 40);
});

test('fault bodies are validated with a readable reason', () => {
  assert.deepEqual(parseFault({ mode: 'none' }), { mode: 'none' });
  assert.deepEqual(parseFault({ mode: 'refuse', seconds: 1.5 }), { mode: 'refuse', seconds: 1.5 });
  assert.deepEqual(parseFault({ mode: 'slow-chunks', delayMs: 200 }), { mode: 'slow-chunks', delayMs: 200 });
  assert.deepEqual(parseFault({ mode: 'hang', scope: 'all' }), { mode: 'hang', scope: 'all' });
  assert.throws(
    () => parseFault({ mode: 'explode' }),
    (err: unknown) => err instanceof FaultError && /must be one of none, refuse/.test(err.message),
  );
  assert.throws(() => parseFault({ mode: 'refuse', seconds: -1 }), /"seconds" must be a number >= 0/);
  assert.throws(() => parseFault({ mode: 'reset-mid-stream', afterChunks: 1.5 }), /whole number/);
  assert.throws(() => parseFault({ mode: 'hang', scope: 'some' }), /"scope"/);
  assert.throws(() => parseFault(['none']), FaultError);
});
