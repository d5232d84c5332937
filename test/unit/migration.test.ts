// Mid-stream migration's pure parts (src/router/proxy/migration): the continuation's body, the cases that must not
// migrate, and the relay that makes a continuation's chunks read as the rest of the first stream; and the simulator's
// position in its filler text, which lets a test compare a migrated stream with one uninterrupted generation.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { continuationBody, migrationApiOf, requestRefusal, sentRefusal } from '../../src/router/proxy/migration/continuation.js';
import { splitEvents, StreamRelay, type RelayFault } from '../../src/router/proxy/migration/relay.js';
import { Migrations, type MigrationLeg, type MigrationNote } from '../../src/router/proxy/migration/migrate.js';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import type { ResponseSink } from '../../src/router/core/exchange.js';
import type { TraceSpan } from '../../src/router/core/trace.js';
import type { ForwardResult } from '../../src/router/proxy/forwarder.js';
import { fillerText, generationStart, outputBudget } from '../../src/tools/sim/tokens.js';

const sse = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const DONE = 'data: [DONE]\n\n';

function chatChunk(id: string, delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}): string {
  return sse({
    id,
    object: 'chat.completion.chunk',
    created: id === 'a' ? 100 : 200,
    model: `m-${id}`,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...extra,
  });
}

/** Feeds `text` to the relay as one read of complete events; the bytes to write, or the fault. */
function take(relay: StreamRelay, text: string): string | RelayFault {
  const out = relay.take(Buffer.from(text), true);
  return Buffer.isBuffer(out) ? out.toString() : out;
}

function payloads(text: string): unknown[] {
  return splitEvents(text)
    .map((e) => e.data)
    .filter((d): d is string => d !== undefined)
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

test('migrationApiOf: chat and text completions only', () => {
  assert.equal(migrationApiOf('/v1/chat/completions'), 'chat');
  assert.equal(migrationApiOf('/v1/completions'), 'completion');
  assert.equal(migrationApiOf('/v1/responses'), undefined);
  assert.equal(migrationApiOf('/v1/embeddings'), undefined);
});

test('requestRefusal: n, logprobs, echo, a fixed seed, a prompt that is no text; a plain stream may migrate', () => {
  const chat = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };
  assert.equal(requestRefusal('chat', chat), undefined);
  assert.equal(requestRefusal('chat', { ...chat, n: 2 }), 'n');
  assert.equal(requestRefusal('chat', { ...chat, n: 1 }), undefined);
  assert.equal(requestRefusal('chat', { ...chat, logprobs: true }), 'logprobs');
  assert.equal(requestRefusal('chat', { ...chat, logprobs: false }), undefined);
  assert.equal(requestRefusal('chat', { ...chat, top_logprobs: 2 }), 'logprobs');
  assert.equal(requestRefusal('chat', { ...chat, echo: true }), 'echo');
  assert.equal(requestRefusal('chat', { ...chat, seed: 7 }), 'seed');
  assert.equal(requestRefusal('chat', { ...chat, messages: 'x' }), 'no-messages');
  const own = [...chat.messages, { role: 'assistant', content: [{ type: 'text', text: 'x' }] }];
  assert.equal(requestRefusal('chat', { ...chat, messages: own, continue_final_message: true }), 'final-message-not-text');
  const text = { model: 'm', stream: true, prompt: 'Say' };
  assert.equal(requestRefusal('completion', text), undefined);
  assert.equal(requestRefusal('completion', { ...text, prompt: ['Say'] }), undefined);
  assert.equal(requestRefusal('completion', { ...text, prompt: [1, 2, 3] }), 'prompt-not-text');
  assert.equal(requestRefusal('completion', { ...text, prompt: ['a', 'b'] }), 'n');
  assert.equal(requestRefusal('completion', { ...text, logprobs: 0 }), 'logprobs');
  assert.equal(requestRefusal('completion', { ...text, echo: true }), 'echo');
  assert.equal(requestRefusal('completion', { ...text, best_of: 3 }), 'n');
});

test('sentRefusal: structured output in progress, no tokens left', () => {
  const body = { messages: [], response_format: { type: 'json_schema', json_schema: {} } };
  assert.equal(sentRefusal(body, { text: '', tokens: 0 }), undefined);
  assert.equal(sentRefusal(body, { text: '{"a"', tokens: 3 }), 'structured-output');
  assert.equal(sentRefusal({ guided_json: {} }, { text: '{', tokens: 1 }), 'structured-output');
  assert.equal(sentRefusal({ response_format: { type: 'text' } }, { text: 'x', tokens: 1 }), undefined);
  assert.equal(sentRefusal({ max_tokens: 3 }, { text: 'a b c', tokens: 3 }), 'no-tokens-left');
  assert.equal(sentRefusal({ max_completion_tokens: 4 }, { text: 'a b c', tokens: 3 }), undefined);
});

test('continuationBody: chat gets a final assistant message to continue, the limits lowered by the tokens sent', () => {
  const body = {
    model: 'm',
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 40,
    max_completion_tokens: 30,
    min_tokens: 5,
    stream_options: { include_usage: true },
  };
  const next = continuationBody('chat', body, { text: 'The quick', tokens: 2 });
  assert.deepEqual(next, {
    ...body,
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'The quick' },
    ],
    continue_final_message: true,
    add_generation_prompt: false,
    max_tokens: 38,
    max_completion_tokens: 28,
    min_tokens: 3,
  });
  // the original is untouched
  assert.equal(body.messages.length, 1);
  // nothing sent yet: the same body
  assert.equal(continuationBody('chat', body, { text: '', tokens: 0 }), body);
  // a client continuing its own assistant message: the text goes on from it
  const own = { ...body, messages: [...body.messages, { role: 'assistant', content: 'Sure:' }], continue_final_message: true };
  const more = continuationBody('chat', own, { text: ' yes', tokens: 1 });
  assert.deepEqual((more.messages as unknown[]).at(-1), { role: 'assistant', content: 'Sure: yes' });
  assert.equal((more.messages as unknown[]).length, 2);
});

test('continuationBody: a completion gets the text appended to its prompt', () => {
  const next = continuationBody('completion', { prompt: 'Say: ', max_tokens: 10, stream: true }, { text: 'The quick', tokens: 2 });
  assert.deepEqual(next, { prompt: 'Say: The quick', max_tokens: 8, stream: true });
  assert.deepEqual(continuationBody('completion', { prompt: ['Say: '] }, { text: 'x', tokens: 1 }), { prompt: 'Say: x' });
});

test('splitEvents: LF, CRLF and CR line ends, several data lines, comments', () => {
  const events = splitEvents('data: a\n\n: note\r\ndata:b\r\ndata: c\r\n\r\nevent: x\rdata\r\r');
  assert.deepEqual(
    events.map((e) => e.data),
    ['a', 'b\nc', ''],
  );
  assert.equal(events.map((e) => e.raw).join(''), 'data: a\n\n: note\r\ndata:b\r\ndata: c\r\n\r\nevent: x\rdata\r\r');
  assert.deepEqual(
    splitEvents(': ping\n\n').map((e) => e.data),
    [undefined],
  );
});

test('relay: the first stream passes as it came, followed: text, tokens, role', () => {
  const relay = new StreamRelay('chat');
  const first =
    chatChunk('a', { role: 'assistant', content: '' }) + chatChunk('a', { content: 'The' }) + chatChunk('a', { content: ' quick' });
  const input = Buffer.from(first);
  assert.equal(relay.take(input, true), input, 'the same bytes, not a copy');
  assert.equal(relay.text, 'The quick');
  assert.equal(relay.tokens, 2);
  assert.equal(relay.finished, false);
  assert.equal(relay.refusal, undefined);
  assert.deepEqual(relay.ended(), { failure: 'reset', detail: 'the engine ended its stream before a finish_reason or [DONE]' });
});

test('relay: a continuation reads as the rest of the first stream (id, created, model; no second role; one [DONE])', () => {
  const relay = new StreamRelay('chat');
  take(
    relay,
    chatChunk('a', { role: 'assistant', content: '' }) + chatChunk('a', { content: 'The' }) + chatChunk('a', { content: ' quick' }),
  );
  relay.continueOn();
  const out = take(
    relay,
    chatChunk('b', { role: 'assistant', content: '' }) +
      chatChunk('b', { content: ' brown' }) +
      chatChunk('b', { content: ' fox' }, 'length') +
      DONE,
  );
  assert.equal(typeof out, 'string');
  const chunks = payloads(out as string);
  assert.equal(chunks.length, 3, 'the role chunk is dropped');
  for (const c of chunks.slice(0, 2) as Record<string, unknown>[]) {
    assert.equal(c.id, 'a');
    assert.equal(c.created, 100);
    assert.equal(c.model, 'm-a');
    assert.equal((c.choices as { delta: Record<string, unknown> }[])[0]?.delta.role, undefined);
  }
  assert.equal(chunks[2], '[DONE]');
  assert.equal(relay.text, 'The quick brown fox');
  assert.equal(relay.tokens, 4);
  assert.equal(relay.finished, true);
  assert.equal(relay.done, true);
  assert.equal(relay.ended(), undefined);
});

test('relay: a role chunk that carries content keeps its content, without the role', () => {
  const relay = new StreamRelay('chat');
  take(relay, chatChunk('a', { role: 'assistant', content: '' }) + chatChunk('a', { content: 'The' }));
  relay.continueOn();
  const chunks = payloads(take(relay, chatChunk('b', { role: 'assistant', content: ' quick' })) as string) as Record<string, unknown>[];
  assert.deepEqual((chunks[0] as { choices: { delta: unknown }[] }).choices[0]?.delta, { content: ' quick' });
});

test('relay: a stream broken before any chunk: the continuation is the stream (its id, its role chunk)', () => {
  const relay = new StreamRelay('chat');
  relay.opened();
  relay.continueOn();
  const chunks = payloads(take(relay, chatChunk('b', { role: 'assistant', content: '' }) + chatChunk('b', { content: 'The' })) as string);
  assert.equal(chunks.length, 2);
  assert.equal((chunks[0] as { id: string }).id, 'b');
});

test('relay: usage adds both parts (the first prompt, the completion tokens of both)', () => {
  const relay = new StreamRelay('chat');
  take(
    relay,
    chatChunk('a', { role: 'assistant', content: '' }) + chatChunk('a', { content: 'The' }) + chatChunk('a', { content: ' quick' }),
  );
  relay.continueOn();
  // the continuation's prompt holds the text so far: 10 + 2
  const usage = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 };
  const chunks = payloads(
    take(
      relay,
      chatChunk('b', { content: ' brown' }, 'stop') + sse({ id: 'b', created: 200, model: 'm-b', choices: [], usage }) + DONE,
    ) as string,
  ) as Record<string, unknown>[];
  assert.deepEqual(chunks[1]?.usage, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
  assert.equal(chunks[1]?.id, 'a');
});

test('relay: continuous usage stats count the tokens sent and give the first prompt', () => {
  const relay = new StreamRelay('completion');
  const chunk = (id: string, text: string, completion: number, prompt: number) =>
    sse({
      id,
      object: 'text_completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, text, logprobs: null, finish_reason: null }],
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    });
  // one chunk carried three tokens: usage counts them where chunks would say one
  take(relay, chunk('a', 'The quick brown', 3, 7));
  assert.equal(relay.tokens, 3);
  relay.continueOn();
  const out = payloads(take(relay, chunk('b', ' fox', 1, 11)) as string) as Record<string, unknown>[];
  assert.deepEqual(out[0]?.usage, { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 });
  assert.equal(relay.tokens, 4);
  assert.equal(relay.text, 'The quick brown fox');
});

test('relay: faults — an engine 5xx error event, a chunk that is not JSON; the events before go out', () => {
  const relay = new StreamRelay('chat');
  const good = chatChunk('a', { content: 'The' });
  const fault = take(relay, good + sse({ error: { message: 'boom', type: 'InternalServerError', code: 500 } })) as RelayFault;
  assert.equal(fault.failure, 'engine-5xx');
  assert.equal(fault.before?.toString(), good);
  assert.equal(relay.text, 'The');
  const broken = take(new StreamRelay('chat'), 'data: {"id":\n\n') as RelayFault;
  assert.equal(broken.failure, 'protocol');
  assert.equal(broken.before, undefined);
  // older vLLM's shape
  assert.equal((take(new StreamRelay('chat'), sse({ object: 'error', message: 'x', code: 503 })) as RelayFault).failure, 'engine-5xx');
  // a 4xx error event is the request's: passed on, and the stream ends as it came
  const refused = new StreamRelay('chat');
  const event = sse({ error: { message: 'bad', code: 400 } });
  assert.equal(take(refused, event), event);
  assert.equal(refused.refusal, 'engine-error');
  assert.equal(refused.ended(), undefined);
});

test('relay: tool-call deltas, reasoning and several choices make a stream not continuable', () => {
  const tools = new StreamRelay('chat');
  take(tools, chatChunk('a', { tool_calls: [{ index: 0, function: { name: 'f', arguments: '' } }] }));
  assert.equal(tools.refusal, 'tool-calls');
  const reasoning = new StreamRelay('chat');
  take(reasoning, chatChunk('a', { reasoning_content: 'hmm' }));
  assert.equal(reasoning.refusal, 'reasoning');
  const n = new StreamRelay('completion');
  take(n, sse({ id: 'a', choices: [{ index: 1, text: 'x', finish_reason: null }] }));
  assert.equal(n.refusal, 'n');
});

test('relay: an event too long to follow is passed on and never continued', () => {
  const relay = new StreamRelay('chat');
  const bytes = Buffer.from('data: {"id":"a"');
  assert.equal(relay.take(bytes, false), bytes);
  assert.equal(relay.refusal, 'unfollowed');
  assert.equal(relay.atBoundary, false);
  assert.equal(relay.ended(), undefined);
});

test('simulator: a continuation starts where its text so far ends, and ends where the whole answer would', () => {
  const messages = [{ role: 'user', content: 'Hello there' }];
  assert.equal(generationStart('chat', { messages }), 0);
  const partial = [...messages, { role: 'assistant', content: 'The quick' }];
  assert.equal(generationStart('chat', { messages: partial }), 0, 'without continue_final_message: a new turn');
  assert.equal(generationStart('chat', { messages: partial, continue_final_message: true }), 2);
  assert.equal(generationStart('completion', { prompt: 'Say: The quick brown' }), 3);
  assert.equal(generationStart('completion', { prompt: ['Say:The quick'] }), 2);
  assert.equal(generationStart('completion', { prompt: 'Hello world! The quick brown fox.' }), 0);
  assert.equal(generationStart('completion', { prompt: 'Hello' }), 0);
  assert.equal(fillerText(2) + fillerText(3, 2), fillerText(5));
  assert.deepEqual(outputBudget({}, 16, 2), { tokens: 14, finishReason: 'stop' });
  assert.deepEqual(outputBudget({ max_tokens: 38 }, 64, 2), { tokens: 38, finishReason: 'length' });
  assert.deepEqual(outputBudget({}, 16, 20), { tokens: 1, finishReason: 'stop' });
});

// The runner (src/router/proxy/migration/migrate.ts) with a scripted `send`: which legs it sends, what it tells.
describe('Migrations: the loop around the forward', () => {
  const a = { url: 'http://a' } as Endpoint;
  const b = { url: 'http://b' } as Endpoint;
  const c = { url: 'http://c' } as Endpoint;

  function harness(limit: number, candidates: readonly Endpoint[]) {
    const outcomes: string[] = [];
    const events: { name: string; attributes: Record<string, unknown> }[] = [];
    const written: string[] = [];
    const res = {
      destroyed: false,
      end(chunk?: string) {
        if (chunk !== undefined) written.push(chunk);
      },
    } as unknown as ResponseSink;
    const trace = {
      event: (name: string, attributes: Record<string, unknown>) => events.push({ name, attributes }),
    } as unknown as TraceSpan;
    const migrations = new Migrations({ limit, totalMs: 0, chat: true }, { migration: (_m, o) => outcomes.push(o) });
    const note: MigrationNote = { migrations: 0 };
    const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 };
    const run = {
      model: 'm',
      path: '/v1/chat/completions',
      parsed: body,
      body: Buffer.from(JSON.stringify(body)),
      candidates: () => candidates,
      res,
      note,
      trace,
      onFirstByte: undefined,
    };
    return { outcomes, events, written, migrations, note, run };
  }

  /** a leg that streams `chunks` and then breaks (or ends, with `done`) on `endpoint` */
  function leg(l: MigrationLeg | undefined, endpoint: Endpoint, chunks: string, done: boolean): ForwardResult {
    assert.ok(l !== undefined, 'a migratable stream gets a relay');
    if (!l.relay.continuing) l.relay.opened();
    l.relay.take(Buffer.from(chunks), true);
    return done ? { kind: 'answered', status: 200, endpoint } : { kind: 'broken', status: 200, endpoint, failure: 'reset' };
  }

  test('a broken stream goes on on another endpoint with the text so far; completed', async () => {
    const h = harness(1, [a, b]);
    const legs: MigrationLeg[] = [];
    const result = await h.migrations.forward(h.run, async (l) => {
      legs.push(l as MigrationLeg);
      return legs.length === 1
        ? leg(l, a, chatChunk('a', { role: 'assistant', content: '' }) + chatChunk('a', { content: 'The' }), false)
        : leg(l, b, chatChunk('b', { content: ' quick' }, 'stop') + DONE, true);
    });
    assert.deepEqual(result, { kind: 'answered', status: 200, endpoint: b });
    assert.equal(legs.length, 2);
    assert.deepEqual([...(legs[1]?.exclude ?? [])], [a]);
    const sent = JSON.parse((legs[1] as MigrationLeg).body.toString()) as Record<string, unknown>;
    assert.deepEqual(sent.messages, [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'The' },
    ]);
    assert.equal(sent.max_tokens, 9);
    assert.deepEqual(h.outcomes, ['migrated', 'completed']);
    assert.deepEqual(h.note, { migrations: 1 });
    assert.equal(h.events[0]?.name, 'llm_router.migration');
    assert.equal(h.events[0]?.attributes['llm_router.migration.tokens_sent'], 1);
    assert.deepEqual(h.written, []);
  });

  test('the limit reached: the router error event ends the stream', async () => {
    const h = harness(1, [a, b, c]);
    let n = 0;
    const result = await h.migrations.forward(h.run, async (l) =>
      leg(l, ++n === 1 ? a : b, chatChunk('x', { content: n === 1 ? 'The' : ' quick' }), false),
    );
    assert.equal(n, 2);
    assert.deepEqual(result, { kind: 'broken', status: 200, endpoint: b, failure: 'reset' });
    assert.deepEqual(h.outcomes, ['migrated', 'limit']);
    assert.deepEqual(h.note, { migrations: 1, notMigrated: 'limit' });
    assert.match(h.written[0] ?? '', /"code":"upstream_stream_error"/);
  });

  test('no other endpoint, or a refused case: no continuation', async () => {
    const alone = harness(2, [a]);
    await alone.migrations.forward(alone.run, async (l) => leg(l, a, chatChunk('a', { content: 'The' }), false));
    assert.deepEqual(alone.outcomes, ['no-endpoint']);
    assert.equal(alone.written.length, 1);
    const tools = harness(2, [a, b]);
    await tools.migrations.forward(tools.run, async (l) => leg(l, a, chatChunk('a', { tool_calls: [{ index: 0 }] }), false));
    assert.deepEqual(tools.outcomes, ['refused']);
    assert.equal(tools.note.notMigrated, 'tool-calls');
    // n = 2 never gets a relay: the attempt writes the error event, the runner only counts it
    const n = harness(2, [a, b]);
    const run = { ...n.run, parsed: { ...n.run.parsed, n: 2 } };
    await n.migrations.forward(run, async (l) => {
      assert.equal(l, undefined);
      return { kind: 'broken', status: 200, endpoint: a, failure: 'reset' };
    });
    assert.deepEqual(n.outcomes, ['refused']);
    assert.equal(n.note.notMigrated, 'n');
    assert.deepEqual(n.written, []);
    // not a stream: sent as it is
    const plain = harness(2, [a, b]);
    await plain.migrations.forward({ ...plain.run, parsed: { ...plain.run.parsed, stream: false } }, async (l) => {
      assert.equal(l, undefined);
      return { kind: 'answered', status: 200, endpoint: a };
    });
    assert.deepEqual(plain.outcomes, []);
  });
});
