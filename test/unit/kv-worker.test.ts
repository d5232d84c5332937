// The in-process tokenizer off the event loop (src/router/kv/in-process.ts, tokenize-worker.ts): its ids equal the
// tokenizer's own on this thread (a real Qwen3 tokenizer, chats and prompts); a job past its deadline falls back with
// `timeout` and is stopped at its next pause, so the next jobs are served; a step that cannot pause makes the jobs
// behind it fall back at once (`tokenizer-busy`), and past restartMs the worker is restarted (counted; its caches are
// gone) and serves again; a chat that renders past the character cap is `too-large`; a request's own chat_template
// is refused unless trusted, on both the in-process and the engine path.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { InProcessTokenizers } from '../../src/router/kv/in-process.js';
import { promptFields, RequestTokenizer, type TokenizeOutcome } from '../../src/router/kv/request-tokens.js';
import type { TextPrompt } from '../../src/router/kv/prompt-fields.js';
import { conversation } from '../support/conversations.js';
import { FIXTURE_TOKENIZER, publishedTokenizer } from '../support/tokenizers.js';
import { eventually } from '../support/within.js';

const QWEN3 = publishedTokenizer('qwen3');
const closing: { close(): Promise<void> }[] = [];
after(async () => {
  for (const c of closing) await c.close();
});

function tokenizers(opts: ConstructorParameters<typeof InProcessTokenizers>[0]): InProcessTokenizers {
  const t = new InProcessTokenizers(opts);
  closing.push(t);
  return t;
}

function requestTokenizer(opts: ConstructorParameters<typeof RequestTokenizer>[0]): RequestTokenizer {
  const t = new RequestTokenizer(opts);
  closing.push(t);
  return t;
}

function prompt(body: Record<string, unknown>, trustChatTemplate = false): TextPrompt {
  const p = promptFields(body, { trustChatTemplate });
  assert.ok(p.kind === 'chat' || p.kind === 'prompt', JSON.stringify(p));
  return p;
}

/** A chat whose template loops for many seconds in one render (one step the worker cannot pause). */
const LOOPING = {
  messages: [{ role: 'user', content: 'hi' }],
  chat_template: '{% for i in range(200000000) %}{% endfor %}{{ messages[0].content }}',
};

test('Qwen3 in the worker: every turn of a corpus of conversations, and prompts, give the ids of the tokenizer on this thread', async () => {
  const rt = requestTokenizer({ mode: QWEN3, timeoutMs: 30_000 });
  assert.equal(await rt.preload(QWEN3), true);
  const hf = await HfTokenizer.load(QWEN3);
  let turns = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const all = conversation(seed, 8, 30);
    for (let n = 2; n <= all.length; n++) {
      const messages = all.slice(0, n);
      if (messages[n - 1]?.role !== 'user') continue;
      const out = await rt.tokenize('q', { model: 'q', messages });
      assert.equal(out.source, 'path', JSON.stringify(out));
      assert.deepEqual(Array.from(out.tokens ?? []), hf.encode(hf.renderChat(messages), false), `seed ${seed}, ${n} messages`);
      turns++;
    }
    const text = all.map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
    const out = await rt.tokenize('q', { model: 'q', prompt: text });
    assert.deepEqual(Array.from(out.tokens ?? []), hf.encode(text, true));
  }
  assert.ok(turns > 30, `${turns} turns`);
  // the run-time checks found no turn rendered otherwise than whole
  assert.equal((await rt.localStats(QWEN3))?.chats.mismatches, 0);
});

test('a job past its deadline falls back with timeout and is stopped at its next pause: the next job is served at once', async () => {
  // a long prompt of many short pieces (a special token every few words): thousands of slices
  const long = prompt({ prompt: '<|eot_id|>the router sends each request 1234 '.repeat(80_000) });
  const small = prompt({ prompt: 'Hello world' });
  // how long the whole job takes here, with no deadline to speak of
  const whole = tokenizers({ cacheBytes: 64 * 2 ** 20, timeoutMs: 120_000, busyMs: 60_000, sliceChars: 256 });
  assert.equal(await whole.preload(FIXTURE_TOKENIZER), true);
  let started = performance.now();
  const full = await whole.tokenize(FIXTURE_TOKENIZER, long);
  const fullMs = performance.now() - started;
  assert.ok(full.tokens && full.tokens.length > 500_000, JSON.stringify(full.fallback));

  const t = tokenizers({ cacheBytes: 64 * 2 ** 20, timeoutMs: 150, busyMs: 60_000, sliceChars: 256 });
  assert.equal(await t.preload(FIXTURE_TOKENIZER), true);
  started = performance.now();
  assert.deepEqual(await t.tokenize(FIXTURE_TOKENIZER, long), { fallback: 'timeout' });
  const next = await t.tokenize(FIXTURE_TOKENIZER, small);
  const nextMs = performance.now() - started;
  assert.ok(next.tokens && next.tokens.length > 0, JSON.stringify(next));
  // the long job did not run on: the next one was answered well before the long one could have ended
  assert.ok(nextMs < fullMs / 2, `next answered after ${nextMs.toFixed(0)} ms; the whole job takes ${fullMs.toFixed(0)} ms`);
  // and what it did not reach was never cached
  const stats = await t.stats(FIXTURE_TOKENIZER);
  assert.ok(stats && stats.encoder.cacheEntries < 80_000, `${stats?.encoder.cacheEntries} pieces cached`);
  assert.equal(t.restarts, 0);
});

test('a step that cannot pause: the jobs behind it fall back at once (tokenizer-busy); past restartMs the worker restarts, its caches gone', async () => {
  const t = tokenizers({ cacheBytes: 64 * 2 ** 20, timeoutMs: 5_000, busyMs: 50, restartMs: 800 });
  assert.equal(await t.preload(FIXTURE_TOKENIZER), true);
  const chat = prompt({ messages: conversation(4, 6, 30) });
  assert.ok((await t.tokenize(FIXTURE_TOKENIZER, chat)).tokens);
  const before = await t.stats(FIXTURE_TOKENIZER);
  assert.ok(before && before.encoder.cacheEntries > 0);

  const stuck = t.tokenize(FIXTURE_TOKENIZER, prompt(LOOPING, true));
  // small jobs meanwhile: none waits for the loop (each is answered well within its 5 s deadline)
  const outcomes: { outcome: TokenizeOutcome; ms: number }[] = [];
  await eventually(
    'small jobs fall back at once while the loop runs',
    async () => {
      const started = performance.now();
      const outcome = await t.tokenize(FIXTURE_TOKENIZER, prompt({ prompt: `small ${outcomes.length}` }));
      outcomes.push({ outcome, ms: performance.now() - started });
      await new Promise((r) => setTimeout(r, 20));
      return outcome;
    },
    (o) => o.fallback === 'tokenizer-busy',
  );
  assert.ok(
    outcomes.every((o) => o.ms < 2_000),
    JSON.stringify(outcomes.map((o) => [o.outcome.fallback, Math.round(o.ms)])),
  );
  const given = await stuck;
  assert.ok(given.fallback === 'tokenizer-busy' || given.fallback === 'timeout', JSON.stringify(given));
  await eventually(
    'the worker restarted',
    async () => t.restarts,
    (n) => n === 1,
  );
  // the new worker loads the directory again, then serves; the caches were lost with the old one
  const again = await eventually(
    'tokenized again after the restart',
    () => t.tokenize(FIXTURE_TOKENIZER, prompt({ prompt: 'after the restart' })),
    (o) => o.tokens !== undefined,
  );
  assert.equal(again.source, 'path');
  const after = await t.stats(FIXTURE_TOKENIZER);
  assert.ok(after && after.encoder.cacheEntries < before.encoder.cacheEntries, `${after?.encoder.cacheEntries} pieces now`);
  assert.equal(t.restarts, 1);
});

test("a request's own chat_template: refused unless trusted (both modes, and its kwargs' form); trusted, bounded in output", async () => {
  const hf = await HfTokenizer.load(FIXTURE_TOKENIZER);
  const messages = [{ role: 'user', content: 'Hello there' }];
  const own = '{%- for m in messages %}{{- m.role + ": " + m.content + "\\n" }}{%- endfor %}';
  let posts = 0;
  const post = (): Promise<never> => {
    posts++;
    return Promise.reject(new Error('no engine here'));
  };
  const target = { url: 'http://127.0.0.1:1' };
  const untrusted = requestTokenizer({ mode: FIXTURE_TOKENIZER, models: { e: 'engine' }, timeoutMs: 30_000, post });
  for (const model of ['p', 'e']) {
    assert.deepEqual(await untrusted.tokenize(model, { model, messages, chat_template: own }, target), { fallback: 'unsupported-body' });
    assert.deepEqual(await untrusted.tokenize(model, { model, messages, chat_template_kwargs: { chat_template: own } }, target), {
      fallback: 'unsupported-body',
    });
  }
  assert.equal(posts, 0, 'the engine was not asked');
  // other kwargs, and a null template, are no template of the request's
  const plain = await untrusted.tokenize('p', { model: 'p', messages, chat_template: null, chat_template_kwargs: { x: 1 } });
  assert.ok(plain.tokens, JSON.stringify(plain));

  const trusted = requestTokenizer({ mode: FIXTURE_TOKENIZER, timeoutMs: 30_000, trustRequestChatTemplate: true, maxPromptChars: 1000 });
  const ids = await trusted.tokenize('p', { model: 'p', messages, chat_template: own });
  assert.deepEqual(Array.from(ids.tokens ?? []), hf.encode(hf.renderChat(messages, { chat_template: own }), false));
  const viaKwargs = await trusted.tokenize('p', { model: 'p', messages, chat_template_kwargs: { chat_template: own } });
  assert.deepEqual(viaKwargs.tokens, ids.tokens);
  // a few characters in, far more out: the rendered text is held to the cap too
  const blowUp = '{% for i in range(500) %}{{ messages[0].content }}{% endfor %}';
  assert.deepEqual(await trusted.tokenize('p', { model: 'p', messages, chat_template: blowUp }), { fallback: 'too-large' });
});
