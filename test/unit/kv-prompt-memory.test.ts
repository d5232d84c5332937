// PromptMemory (src/router/kv/prompt-memory.ts): an earlier prompt is found by a later one that starts with it and
// continues at a new word; the longest such wins; scopes (model, special tokens) never mix; and the engine tokenizer
// sends only the new text of such a prompt, checks the first ones against whole tokenizations, and stops for a model
// whose tokenizer does not cut there.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PromptMemory, safeCut } from '../../src/router/kv/prompt-memory.js';
import { RequestTokenizer } from '../../src/router/kv/request-tokens.js';

const words = (seed: string, n: number, from = 0): string => Array.from({ length: n }, (_, i) => ` ${seed}${from + i}`).join('');

test('safeCut: only where the new text begins a word after a non-space', () => {
  assert.equal(safeCut('hello world', 5), true);
  assert.equal(safeCut('hello  world', 6), false, 'inside a run of spaces');
  assert.equal(safeCut('helloworld', 5), false, 'inside a word');
  assert.equal(safeCut('hello\n world', 6), false, 'after a newline');
  assert.equal(safeCut('x', 0), false);
  assert.equal(safeCut('x ', 2), false);
});

test('PromptMemory: the longest earlier prompt the text starts with; scopes apart; a changed earlier text is no match', () => {
  const m = new PromptMemory(1 << 20, 64);
  const one = words('w', 40);
  const two = one + words('w', 40, 40);
  m.remember(
    'm\u00001',
    one,
    Uint32Array.from({ length: 40 }, (_, i) => i),
  );
  m.remember(
    'm\u00001',
    two,
    Uint32Array.from({ length: 80 }, (_, i) => i),
  );
  const three = two + words('w', 10, 80);
  assert.equal(m.longestPrefix('m\u00001', three)?.chars, two.length);
  assert.equal(m.longestPrefix('m\u00001', one + words('x', 5))?.chars, one.length);
  assert.equal(m.longestPrefix('m\u00000', three), undefined, 'another scope (special tokens off)');
  assert.equal(m.longestPrefix('other\u00001', three), undefined, 'another model');
  // the same head, then a change inside the earlier text: no match
  assert.equal(m.longestPrefix('m\u00001', one.replace(' w30', ' v30') + words('w', 10, 80)), undefined);
  // a continuation glued to the last word is not a place to cut
  assert.equal(m.longestPrefix('m\u00001', `${one}tail`), undefined);
  // short prompts are not filed
  m.remember('m\u00001', 'short', new Uint32Array(1));
  assert.equal(m.longestPrefix('m\u00001', 'short and more'), undefined);
});

test('PromptMemory stays within its bytes', () => {
  const m = new PromptMemory(64 * 1024, 16);
  for (let i = 0; i < 500; i++) m.remember('m', `${i} ${words('w', 100)}`, new Uint32Array(1000));
  assert.ok(m.bytes <= 64 * 1024, String(m.bytes));
});

/** A word-level /tokenize: each word with its leading space one id (as a byte-level BPE cuts at spaces) */
async function wordEngine(cutsWords: boolean) {
  const bodies: Array<Record<string, unknown>> = [];
  /** what it answered for each whole prompt (special tokens added) */
  const answers = new Map<string, number[]>();
  const id = (w: string): number => [...w].reduce((h, c) => (h * 31 + (c.codePointAt(0) as number)) >>> 0, 7);
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => {
      text += c.toString('utf8');
    });
    req.on('end', () => {
      const body = JSON.parse(text) as { prompt: string; add_special_tokens?: boolean };
      bodies.push(body);
      const pieces = body.prompt.match(/ ?[^ ]+| +/g) ?? [];
      // a tokenizer that is not cut at spaces: the ids depend on the prompt's length too
      const salt = cutsWords ? 0 : body.prompt.length;
      const tokens = [...(body.add_special_tokens === false ? [] : [1]), ...pieces.map((p) => (id(p) + salt) >>> 0)];
      if (body.add_special_tokens !== false) answers.set(body.prompt, tokens);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ tokens }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, bodies, answers, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test("engine mode: a conversation's next turn sends only its new text; the first four are checked whole, then one in 64", async () => {
  const engine = await wordEngine(true);
  after(() => engine.close());
  const rt = new RequestTokenizer({ timeoutMs: 5_000 });
  after(() => rt.close());
  let prompt = words('turn0w', 200);
  const first = await rt.tokenize('m', { model: 'm', prompt }, engine);
  assert.equal(first.tokens?.length, 201);
  for (let t = 1; t <= 10; t++) {
    prompt += words(`turn${t}w`, 50);
    const before = engine.bodies.length;
    const out = await rt.tokenize('m', { model: 'm', prompt }, engine);
    // the ids are those of the whole prompt, whichever way they were had
    assert.equal(out.tokens?.length, 201 + 50 * t);
    assert.equal(out.source, 'engine');
    const sent = engine.bodies.slice(before) as Array<{ prompt: string; add_special_tokens?: boolean }>;
    const tail = sent.find((b) => b.add_special_tokens === false);
    assert.ok(tail !== undefined && tail.prompt === words(`turn${t}w`, 50), `turn ${t}: the new text alone`);
    // checked: the whole prompt too, and then its answer is used; after four, the earlier ids and the new text's
    assert.equal(sent.length, t <= 4 ? 2 : 1, `turn ${t}`);
    assert.equal(out.resumedChars !== undefined, t > 4);
  }
});

test('engine mode: a tokenizer that does not cut at the new word is found out by the check, and resuming stops for the model', async () => {
  const engine = await wordEngine(false);
  after(() => engine.close());
  const mismatches: string[] = [];
  const rt = new RequestTokenizer({ timeoutMs: 5_000, onResumeMismatch: (m) => mismatches.push(m) });
  after(() => rt.close());
  let prompt = words('a', 200);
  await rt.tokenize('m', { model: 'm', prompt }, engine);
  prompt += words('b', 50);
  const checked = await rt.tokenize('m', { model: 'm', prompt }, engine);
  // the whole answer is what the request gets, not the earlier ids and the new text's
  assert.deepEqual([...(checked.tokens ?? [])], engine.answers.get(prompt));
  assert.deepEqual(mismatches, ['m']);
  for (let t = 0; t < 5; t++) {
    prompt += words(`c${t}x`, 20);
    const before = engine.bodies.length;
    await rt.tokenize('m', { model: 'm', prompt }, engine);
    assert.deepEqual(
      engine.bodies.slice(before).map((b) => b.prompt),
      [prompt],
      'whole prompts only',
    );
  }
  assert.deepEqual(mismatches, ['m'], 'said once');
});
