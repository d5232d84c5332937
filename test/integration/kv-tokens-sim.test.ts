// The router's in-process tokenizer (path mode) and `llm-router sim --tokenizer test/fixtures/tokenizer` agree on the
// ids of a corpus of completions and chats: the sim's /tokenize asked directly, and the router's engine mode asking it.
// Without --tokenizer the sim's ids are its word-level ones, which differ: the comparison means something.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RequestTokenizer } from '../../src/router/kv/request-tokens.js';
import { conversation } from '../support/conversations.js';
import { stopAll } from '../support/process.js';
import { call, startSim } from '../support/router.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
after(() => stopAll());

/** Completions and chats with the fields that change their ids. */
function corpus(): Record<string, unknown>[] {
  const bodies: Record<string, unknown>[] = [
    { prompt: 'Hello world! The quick brown fox.' },
    { prompt: 'No special tokens here', add_special_tokens: false },
    { prompt: ['A batch of one'] },
    { prompt: 'Text with <|eot_id|> inside and 東京 🙂' },
  ];
  for (let seed = 1; seed <= 12; seed++) {
    const all = conversation(seed, 4, 25);
    for (let end = 2; end <= all.length; end += 2) {
      const messages = all.slice(0, end);
      const body: Record<string, unknown> = { messages };
      if (seed % 3 === 1) body.add_generation_prompt = false;
      if (seed % 4 === 2) body.chat_template_kwargs = { date_string: `${seed} Dec 2026` };
      if (seed % 5 === 3) body.add_special_tokens = true;
      bodies.push(body);
    }
  }
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  ];
  bodies.push({
    messages: [
      { role: 'system', content: 'Tools!' },
      { role: 'user', content: 'Weather in Paris?' },
    ],
    tools,
  });
  // a conversation with tools, turn by turn (the router renders later turns from earlier ones), and an assistant
  // message continued
  const withTools = conversation(99, 5, 25);
  for (let end = 2; end <= withTools.length; end += 2) bodies.push({ messages: withTools.slice(0, end), tools });
  bodies.push({
    messages: [...withTools, { role: 'user', content: 'Go on' }, { role: 'assistant', content: 'Well, the answer ' }],
    add_generation_prompt: false,
    continue_final_message: true,
  });
  return bodies.map((b) => ({ model: 'sim-model', ...b }));
}

test('path mode and the simulator started with --tokenizer give identical ids for completions and chats', async () => {
  const sim = await startSim(['--tokenizer', DIR]);
  const plain = await startSim([]);
  const local = new RequestTokenizer({ mode: DIR, timeoutMs: 30_000 });
  after(() => local.close());
  const remote = new RequestTokenizer({ mode: 'engine', timeoutMs: 10_000 });
  after(() => remote.close());
  let differsFromWords = 0;
  const bodies = corpus();
  assert.ok(bodies.length > 30);
  for (const body of bodies) {
    const mine = await local.tokenize('sim-model', body);
    assert.equal(mine.source, 'path', JSON.stringify(body));
    const expected = Array.from(mine.tokens ?? []);
    const answer = await call(`${sim.url}/tokenize`, { body: JSON.stringify(body) });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.json<{ tokens: number[] }>().tokens, expected, JSON.stringify(body).slice(0, 200));
    const viaEngine = await remote.tokenize('sim-model', body, { url: sim.url });
    assert.equal(viaEngine.source, 'engine');
    assert.deepEqual(Array.from(viaEngine.tokens ?? []), expected);
    const words = (await call(`${plain.url}/tokenize`, { body: JSON.stringify(body) })).json<{ tokens: number[] }>().tokens;
    if (JSON.stringify(words) !== JSON.stringify(expected)) differsFromWords++;
  }
  assert.equal(differsFromWords, bodies.length, 'the word-level tokenizer gives other ids for every body');
  // later turns were rendered from earlier ones (chat-prefix.ts), and never differed from a whole rendering
  const chats = (await local.localStats(DIR))?.chats;
  assert.ok(chats !== undefined && chats.incremental >= 10 && chats.mismatches === 0, JSON.stringify(chats));
});

test('sim --tokenizer with a directory that is not a tokenizer refuses to start', async () => {
  const bad = startSim(['--tokenizer', path.join(DIR, 'no-such-dir')]);
  await assert.rejects(bad, /--tokenizer/);
});
