// RequestTokenizer (src/router/kv/request-tokens.ts): engine mode against a tiny /tokenize server on port 0 (the body
// it is sent is the request's prompt fields unchanged; timeouts and errors are fallbacks, never failures; answers
// cached, one call for concurrent equal requests), path mode (the piece cache equals a whole tokenization on a corpus
// of multi-turn conversations, and stays within its bytes), and the fallback reasons.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { promptFields, RequestTokenizer, TOKENIZE_FALLBACKS } from '../../src/router/kv/request-tokens.js';
import { ByteLru, SegmentedEncoder } from '../../src/router/kv/token-cache.js';
import { conversation } from '../support/conversations.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');

/** A /tokenize server: records each body; `behave` decides the answer (default: tokens 1..n of the body's length). */
interface FakeEngine {
  readonly url: string;
  readonly bodies: Record<string, unknown>[];
  behave: (body: Record<string, unknown>, res: http.ServerResponse) => void;
  close(): Promise<void>;
}

async function fakeEngine(): Promise<FakeEngine> {
  const bodies: Record<string, unknown>[] = [];
  const held = new Set<http.ServerResponse>();
  const engine = {
    url: '',
    bodies,
    behave: (body: Record<string, unknown>, res: http.ServerResponse) => {
      const n = JSON.stringify(body).length % 50;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ count: n, max_model_len: 4096, tokens: Array.from({ length: n }, (_, i) => i + 1), token_strs: null }));
    },
    async close() {
      for (const r of held) r.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      text += c;
    });
    req.on('end', () => {
      assert.equal(req.url, '/tokenize');
      assert.equal(req.method, 'POST');
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.push(body);
      held.add(res);
      res.on('close', () => held.delete(res));
      engine.behave(body, res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return engine;
}

const engine = await fakeEngine();
after(() => engine.close());

test("engine mode sends the chat request's prompt fields unchanged (and only those) with the model, and returns the engine's ids", async () => {
  // the request's own template is sent too when trusted (--trust-request-chat-template)
  const rt = new RequestTokenizer({ timeoutMs: 5_000, trustRequestChatTemplate: true });
  after(() => rt.close());
  engine.bodies.length = 0;
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Hi' }], name: 'ann' },
  ];
  const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
  const body = {
    model: 'alias-of-m',
    messages,
    tools,
    tool_choice: 'auto',
    add_generation_prompt: false,
    continue_final_message: true,
    documents: [{ title: 't', text: 'd' }],
    chat_template: '{{ messages }}',
    chat_template_kwargs: { enable_thinking: false },
    add_special_tokens: true,
    stream: true,
    temperature: 0.2,
    max_tokens: 9,
  };
  const out = await rt.tokenize('m', body, { url: engine.url });
  assert.equal(engine.bodies.length, 1);
  assert.deepEqual(engine.bodies[0], {
    model: 'm',
    messages,
    add_generation_prompt: false,
    continue_final_message: true,
    tools,
    documents: [{ title: 't', text: 'd' }],
    chat_template: '{{ messages }}',
    chat_template_kwargs: { enable_thinking: false },
    add_special_tokens: true,
  });
  assert.equal(out.fallback, undefined);
  assert.equal(out.source, 'engine');
  assert.equal(out.cached, false);
  const n = JSON.stringify(engine.bodies[0]).length % 50;
  assert.deepEqual(
    Array.from(out.tokens ?? []),
    Array.from({ length: n }, (_, i) => i + 1),
  );

  // a completion: its prompt and add_special_tokens, nothing else; absent template fields are not invented
  await rt.tokenize('m', { model: 'm', prompt: 'Once upon', add_special_tokens: false, echo: true }, { url: engine.url });
  await rt.tokenize('m', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, { url: engine.url });
  assert.deepEqual(engine.bodies.slice(1), [
    { model: 'm', prompt: 'Once upon', add_special_tokens: false },
    { model: 'm', messages: [{ role: 'user', content: 'x' }] },
  ]);
});

test('engine mode caches answers by the prompt fields, and one call serves concurrent equal requests', async () => {
  const rt = new RequestTokenizer({ timeoutMs: 5_000 });
  after(() => rt.close());
  engine.bodies.length = 0;
  const body = { model: 'm', messages: [{ role: 'user', content: 'cache me' }], temperature: 1 };
  const [a, b] = await Promise.all([rt.tokenize('m', body, { url: engine.url }), rt.tokenize('m', body, { url: engine.url })]);
  assert.equal(engine.bodies.length, 1, 'one call for two concurrent equal requests');
  assert.deepEqual(a, b);
  // fields that do not change the tokens do not change the key; the model and every prompt field do
  const c = await rt.tokenize('m', { ...body, temperature: 0, stream: true }, { url: engine.url });
  assert.equal(engine.bodies.length, 1);
  assert.equal(c.cached, true);
  assert.deepEqual(Array.from(c.tokens ?? []), Array.from(a.tokens ?? []));
  assert.ok(rt.engineCacheBytes > 0);
  await rt.tokenize('other', body, { url: engine.url });
  await rt.tokenize('m', { ...body, add_generation_prompt: false }, { url: engine.url });
  assert.equal(engine.bodies.length, 3);
  // a cached answer needs no endpoint at all
  assert.equal((await rt.tokenize('m', body)).cached, true);
});

test('engine mode: a slow engine is a timeout, an error status, bad JSON or a refused connection an engine-error; never a throw', async () => {
  const rt = new RequestTokenizer({ timeoutMs: 100, backoffMs: 0 });
  after(() => rt.close());
  const saved = engine.behave;
  after(() => {
    engine.behave = saved;
  });
  const ask = (text: string) => rt.tokenize('m', { model: 'm', prompt: text }, { url: engine.url });

  engine.behave = () => {}; // never answers (closed with the server)
  assert.deepEqual(await ask('slow'), { fallback: 'timeout' });

  engine.behave = (_b, res) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end('{"error":"boom"}');
  };
  assert.deepEqual(await ask('500'), { fallback: 'engine-error' });

  engine.behave = (_b, res) => res.end('{"tokens": [1, "two"]}');
  assert.deepEqual(await ask('not ids'), { fallback: 'engine-error' });
  engine.behave = (_b, res) => res.end('not json');
  assert.deepEqual(await ask('not json'), { fallback: 'engine-error' });
  engine.behave = (_b, res) => res.destroy();
  assert.deepEqual(await ask('reset'), { fallback: 'engine-error' });

  // nothing listens there any more
  const gone = await fakeEngine();
  const goneUrl = gone.url;
  await gone.close();
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: 'refused' }, { url: goneUrl }), { fallback: 'engine-error' });
  // failures are not cached: the engine answers now
  engine.behave = saved;
  assert.equal((await ask('500')).source, 'engine');
});

test('engine mode: a time-out costs that request alone; an endpoint that failed or answered 5xx is skipped for its backoff, the next one asked at once', async () => {
  let now = 1_000_000;
  const rt = new RequestTokenizer({ timeoutMs: 100, backoffMs: 5_000, now: () => now });
  after(() => rt.close());
  const saved = engine.behave;
  after(() => {
    engine.behave = saved;
  });
  const ask = (text: string, targets: readonly { url: string }[] = [engine]) => rt.tokenize('m', { model: 'm', prompt: text }, targets);
  engine.bodies.length = 0;

  engine.behave = (_b, res) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end('{"error":"bad request"}');
  };
  assert.deepEqual(await ask('refused'), { fallback: 'engine-error' });
  assert.deepEqual(await ask('refused again'), { fallback: 'engine-error' });
  assert.equal(engine.bodies.length, 2, 'a 4xx is about the request: the endpoint is still asked');

  // two slow prompts: each goes without its ids, the next 20 get theirs (a slow request switches nothing off)
  engine.behave = (b, res) => (String(b.prompt).startsWith('slow') ? undefined : saved(b, res));
  assert.deepEqual(await ask('slow one'), { fallback: 'timeout' });
  assert.deepEqual(await ask('slow two'), { fallback: 'timeout' });
  for (let i = 0; i < 20; i++) assert.equal((await ask(`next ${i}`)).source, 'engine');
  engine.behave = saved;
  assert.equal(engine.bodies.length, 24);

  // a 5xx: backed off; the request asks the model's next endpoint at once, and so do the ones after it
  const second = await fakeEngine();
  after(() => second.close());
  engine.behave = (_b, res) => {
    res.writeHead(503);
    res.end();
  };
  const both = [engine, second];
  assert.equal((await ask('503 then next', both)).source, 'engine');
  assert.equal(second.bodies.length, 1);
  engine.behave = saved;
  assert.equal((await ask('meanwhile', both)).source, 'engine');
  assert.equal(engine.bodies.length, 25, 'not asked while backing off');
  assert.equal(second.bodies.length, 2);
  // no other endpoint: the reason is said
  assert.deepEqual(await ask('alone'), { fallback: 'backoff' });
  now += 5_000;
  assert.equal((await ask('later')).source, 'engine');

  // a refused connection: the same, within the one request
  const gone = await fakeEngine();
  const goneUrl = gone.url;
  await gone.close();
  assert.equal((await ask('refused then next', [{ url: goneUrl }, second])).source, 'engine');
  assert.equal(second.bodies.length, 3);
});

test('engine mode: the time-out grows with the prompt (10 ms a thousand characters), so a long prompt waits longer', async () => {
  const rt = new RequestTokenizer({ timeoutMs: 50 });
  after(() => rt.close());
  const saved = engine.behave;
  after(() => {
    engine.behave = saved;
  });
  // the engine answers after 150 ms: past a short prompt's 50 ms, within a 40,000-character prompt's 450 ms
  engine.behave = (b, res) => setTimeout(() => saved(b, res), 150);
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: 'short' }, engine), { fallback: 'timeout' });
  assert.equal((await rt.tokenize('m', { model: 'm', prompt: 'w '.repeat(20_000) }, engine)).source, 'engine');
});

test('fallback reasons: no prompt, unsupported bodies, too large, no endpoint, off; token-id prompts are their own tokens', async () => {
  const rt = new RequestTokenizer({
    models: { quiet: 'off' },
    maxPromptChars: 1000,
    post: () => Promise.reject(new Error('no call expected')),
  });
  const t = { url: 'http://127.0.0.1:1' };
  assert.deepEqual(await rt.tokenize('m', { model: 'm', input: 'embed me' }, t), { fallback: 'no-prompt' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: ['a', 'b'] }, t), { fallback: 'unsupported-body' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: { text: 'x' } }, t), { fallback: 'unsupported-body' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', messages: [] }, t), { fallback: 'unsupported-body' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', messages: 'hi' }, t), { fallback: 'unsupported-body' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: 'x'.repeat(1001) }, t), { fallback: 'too-large' });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', messages: [{ role: 'user', content: 'y'.repeat(1001) }] }, t), {
    fallback: 'too-large',
  });
  assert.deepEqual(await rt.tokenize('m', { model: 'm', prompt: 'fine' }), { fallback: 'no-endpoint' });
  assert.deepEqual(await rt.tokenize('quiet', { model: 'quiet', prompt: 'fine' }, t), { fallback: 'off' });
  const ids = await rt.tokenize('m', { model: 'm', prompt: [5, 6, 7] }, t);
  assert.equal(ids.source, 'request');
  assert.deepEqual(Array.from(ids.tokens ?? []), [5, 6, 7]);
  // a batch of one prompt is that prompt
  assert.deepEqual(promptFields({ prompt: ['only'] }), { kind: 'prompt', fields: { prompt: 'only' }, chars: 4 });
  for (const r of [
    'off',
    'no-prompt',
    'unsupported-body',
    'too-large',
    'no-endpoint',
    'timeout',
    'engine-error',
    'backoff',
    'tokenizer-error',
  ])
    assert.ok((TOKENIZE_FALLBACKS as readonly string[]).includes(r));
});

test('path mode: per-model override to a tokenizer directory; prompts get <|begin_of_text|>, chats the template; errors are fallbacks', async () => {
  const rt = new RequestTokenizer({
    models: { llama: DIR, broken: '/nonexistent/tokenizer' },
    post: () => Promise.reject(new Error('no call')),
    timeoutMs: 30_000,
  });
  after(() => rt.close());
  const hf = await HfTokenizer.load(DIR);
  const prompt = await rt.tokenize('llama', { model: 'llama', prompt: 'Hello world' });
  assert.equal(prompt.source, 'path');
  assert.deepEqual(Array.from(prompt.tokens ?? []), hf.encode('Hello world', true));
  const noSpecial = await rt.tokenize('llama', { model: 'llama', prompt: 'Hello world', add_special_tokens: false });
  assert.deepEqual(Array.from(noSpecial.tokens ?? []), hf.encode('Hello world', false));
  const messages = [{ role: 'user', content: 'Hello world' }];
  const chat = await rt.tokenize('llama', { model: 'llama', messages, chat_template_kwargs: { date_string: '2 Dec 2026' } });
  assert.deepEqual(
    Array.from(chat.tokens ?? []),
    hf.encode(hf.renderChat(messages, { chat_template_kwargs: { date_string: '2 Dec 2026' } }), false),
  );
  const noGen = await rt.tokenize('llama', { model: 'llama', messages, add_generation_prompt: false });
  assert.deepEqual(Array.from(noGen.tokens ?? []), hf.encode(hf.renderChat(messages, { add_generation_prompt: false }), false));
  assert.notDeepEqual(noGen.tokens, chat.tokens);
  const image = { model: 'llama', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] };
  assert.deepEqual(await rt.tokenize('llama', image), { fallback: 'unsupported-body' });
  assert.deepEqual(await rt.tokenize('broken', { model: 'broken', prompt: 'x' }), { fallback: 'tokenizer-error' });
  assert.equal(await rt.preload('/nonexistent/tokenizer'), false);
  assert.equal(rt.modeOf('llama'), DIR);
  assert.equal(rt.modeOf('anything'), 'engine');
});

test('path mode: every turn of a corpus of multi-turn conversations equals a whole tokenization, and later turns reuse earlier ones', async () => {
  const rt = new RequestTokenizer({ mode: DIR, timeoutMs: 30_000 });
  after(() => rt.close());
  const hf = await HfTokenizer.load(DIR);
  let turnsChecked = 0;
  let reusedTurns = 0;
  for (let seed = 1; seed <= 24; seed++) {
    const all = conversation(seed, 8, 30);
    for (let end = 2; end <= all.length; end++) {
      const messages = all.slice(0, end);
      if (messages[messages.length - 1]?.role !== 'user') continue;
      const body = { model: 'm', messages, ...(seed % 3 === 0 ? { add_special_tokens: true } : {}) };
      const out = await rt.tokenize('m', body);
      const whole = hf.encode(hf.renderChat(messages), seed % 3 === 0);
      assert.deepEqual(Array.from(out.tokens ?? []), whole, `seed ${seed}, ${end} messages`);
      turnsChecked++;
      if (out.cached) reusedTurns++;
      // a continuation of the assistant's last answer (no generation prompt) reuses as well
      if (seed % 4 === 0 && end > 2) {
        const cont = [...messages, { role: 'assistant', content: 'Partial answer' }];
        const o = await rt.tokenize('m', { model: 'm', messages: cont, add_generation_prompt: false, continue_final_message: true });
        assert.deepEqual(
          Array.from(o.tokens ?? []),
          hf.encode(hf.renderChat(cont, { add_generation_prompt: false, continue_final_message: true }), false),
        );
      }
    }
  }
  assert.ok(turnsChecked > 100, `${turnsChecked} turns`);
  // every turn after a conversation's first finds its earlier turns
  assert.ok(reusedTurns >= turnsChecked - 24, `${reusedTurns} of ${turnsChecked} reused`);
  const enc = (await rt.localStats(DIR))?.encoder;
  assert.ok(enc && enc.cacheEntries > 0);
});

test('the piece cache stays within its bytes, drops least recently used pieces first, and is still exact after evictions', async () => {
  const hf = await HfTokenizer.load(DIR);
  const maxBytes = 24 * 1024;
  const enc = new SegmentedEncoder(hf, maxBytes);
  let maxSeen = 0;
  for (let seed = 100; seed < 130; seed++) {
    const text = hf.renderChat(conversation(seed, 6, 40));
    assert.deepEqual(Array.from(enc.encode(text, false)), hf.encode(text, false));
    maxSeen = Math.max(maxSeen, enc.cacheBytes);
    assert.ok(enc.cacheBytes <= maxBytes, `${enc.cacheBytes} > ${maxBytes}`);
  }
  assert.ok(maxSeen > maxBytes / 2, 'the cache was used up to near its bound');
  // the first conversation was evicted long ago: only the header every conversation shares is reused, still exact
  const first = hf.renderChat(conversation(100, 6, 40));
  assert.deepEqual(Array.from(enc.encode(first, false)), hf.encode(first, false));
  assert.ok(enc.stats.reusedChars < first.indexOf('You are assistant'), `${enc.stats.reusedChars} chars reused`);
  // and right after, it is reused up to its last boundary token (it ends with the generation prompt's '\n\n')
  const again = `${first}<|start_header_id|>user<|end_header_id|>\n\nmore<|eot_id|>`;
  assert.deepEqual(Array.from(enc.encode(again, true)), hf.encode(again, true));
  assert.equal(enc.stats.reusedChars, first.length - 2);

  const lru = new ByteLru<Uint32Array>(1000, (v) => v.byteLength);
  lru.set('a', new Uint32Array(50)); // 200 bytes + overhead
  lru.set('b', new Uint32Array(50));
  lru.set('c', new Uint32Array(50));
  assert.ok(lru.get('a')); // a is now the most recent
  lru.set('d', new Uint32Array(50));
  assert.ok(lru.bytes <= 1000);
  assert.equal(lru.get('b'), undefined, 'b, the least recently used, went first');
  assert.ok(lru.get('a') && lru.get('d'));
  lru.set('huge', new Uint32Array(1000));
  assert.equal(lru.get('huge'), undefined, 'an entry larger than the whole cache is not kept');
});

test('path mode: a next turn resumes the ids where the turn before ended (its characters are not walked again)', async () => {
  const rt = new RequestTokenizer({ mode: DIR, timeoutMs: 30_000 });
  after(() => rt.close());
  const hf = await HfTokenizer.load(DIR);
  const all = conversation(31, 8, 40);
  const users = all.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  let resumed = 0;
  for (const u of users) {
    const messages = all.slice(0, u + 1);
    const out = await rt.tokenize('m', { model: 'm', messages });
    assert.deepEqual(Array.from(out.tokens ?? []), hf.encode(hf.renderChat(messages), false));
    const enc = (await rt.localStats(DIR))?.encoder;
    // the piece cache walked only the new text: the turn before's rendering came with its resume point
    if ((enc?.last.resumedChars ?? 0) > 0) resumed++;
  }
  assert.ok(resumed >= users.length - 2, `${resumed} of ${users.length} turns resumed`);
  const chats = (await rt.localStats(DIR))?.chats;
  assert.ok((chats?.incremental ?? 0) > 0);
});
