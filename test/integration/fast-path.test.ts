// The fast path (src/router/server/fast) against the real router process: plain inference requests are answered by it,
// everything else is handed with its connection to node:http, and both answer alike.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from '../support/process.js';
import { call, chat, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { startSimHere, stopSimsHere } from '../support/sim-here.js';
import { RawClient, type RawAnswer } from '../support/raw-http.js';
import { readByServer } from '../support/sockets.js';

/** llm_router_fast_path_total: requests the fast path answered, connections it handed to node:http */
async function fastPathCounts(r: Running): Promise<{ answered: number; handedOver: number }> {
  const text = (await call(`${r.url}/metrics`)).text;
  const value = (outcome: string): number =>
    Number(new RegExp(`^llm_router_fast_path_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { answered: value('answered'), handedOver: value('handed-over') };
}

function post(path: string, body: string, extra: readonly string[] = []): string {
  return [
    `POST ${path} HTTP/1.1`,
    'Host: router',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...extra,
    '',
    body,
  ].join('\r\n');
}

describe('fast path', { timeout: 120_000 }, () => {
  // three routers, started at once: one with the default flags, shared by every test that needs no flag of its own (the
  // tests run one after another, each on its own connections, and each counts the fast path's answers as a delta of
  // its own), one with --api-key and one with --fast-path false
  let shared: Running;
  let keyed: Running;
  let slow: Running;
  before(async () => {
    const sim = await startSimHere(['--model', 'm', '--itl-ms', '1', '--ttft-ms', '1']);
    const start = async (extra: readonly string[]): Promise<Running> => {
      const r = await startRouter(['--static-backends', sim.url, '--static-models', 'm', '--client-timeout', '1', ...extra]);
      await waitModelStatus(r.url, 'm', 'ready', 15_000, extra.includes('--api-key') ? { authorization: 'Bearer k' } : {});
      return r;
    };
    [shared, keyed, slow] = await Promise.all([start([]), start(['--api-key', 'k']), start(['--fast-path', 'false'])]);
  });
  after(async () => {
    await stopAll();
    await stopSimsHere();
  });

  test('keep-alive, pipelining, a body in pieces, then a hand-over to node:http on the same connection', async () => {
    const r = shared;
    const before = await fastPathCounts(r);
    const c = await RawClient.connect(r.port);
    try {
      c.write(post('/v1/chat/completions', chat('m')));
      const first = await c.answer();
      assert.equal(first.status, 200);
      assert.equal(first.headers.connection, 'keep-alive');
      assert.match(first.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/);
      assert.ok(first.headers.date, 'a Date header');
      assert.equal(JSON.parse(String(first.body)).object, 'chat.completion');

      // two requests in one write: answered in order
      c.write(
        post('/v1/chat/completions', chat('m'), ['X-Request-Id: one']) + post('/v1/chat/completions', chat('nope'), ['X-Request-Id: two']),
      );
      const [a, b] = [await c.answer(), await c.answer()];
      assert.deepEqual([a.status, a.headers['x-request-id'], b.status, b.headers['x-request-id']], [200, 'one', 404, 'two']);
      assert.equal(JSON.parse(String(b.body)).error.code, 'model_not_found');

      // the head first, the body in three pieces
      const body = chat('m');
      const whole = post('/v1/chat/completions', body);
      const split = whole.length - body.length;
      await c.write(whole.slice(0, split));
      // each piece is sent once the router has read what came before: three reads, however busy the machine
      for (const piece of [body.slice(0, 5), body.slice(5, 20), body.slice(20)]) {
        await readByServer(r.proc.child.pid as number, r.port, c.localPort);
        await c.write(piece);
      }
      assert.equal((await c.answer()).status, 200);

      // the fast path answered all four, not node:http
      assert.equal((await fastPathCounts(r)).answered - before.answered, 4);

      // a GET is node:http's: the connection moves there and keeps working, for inference too
      c.write('GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n');
      const models = await c.answer();
      assert.equal(models.status, 200);
      assert.equal(JSON.parse(String(models.body)).data[0].id, 'm');
      c.write(post('/v1/chat/completions', chat('m')));
      assert.equal((await c.answer()).status, 200);
      // node:http answered the last one: the connection stays where it was handed
      assert.equal((await fastPathCounts(r)).answered - before.answered, 4);
    } finally {
      c.destroy();
    }
  });

  test('300 pipelined requests in one write (about 120 KB) are answered once each, in order', async () => {
    const r = shared;
    const c = await RawClient.connect(r.port);
    try {
      const n = 300;
      const body = chat('not-declared', { padding: 'x'.repeat(200) });
      c.write(Array.from({ length: n }, (_, i) => post('/v1/chat/completions', body, [`X-Request-Id: req-${i}`])).join(''));
      for (let i = 0; i < n; i++) {
        const a = await c.answer();
        assert.equal(a.status, 404);
        assert.equal(a.headers['x-request-id'], `req-${i}`);
      }
      // the connection still serves after the burst
      c.write(post('/v1/chat/completions', chat('m')));
      assert.equal((await c.answer()).status, 200);
    } finally {
      c.destroy();
    }
  });

  test('streams are chunked SSE; Connection: close ends the connection after the answer', async () => {
    const r = shared;
    const c = await RawClient.connect(r.port);
    try {
      c.write(post('/v1/chat/completions', chat('m', { stream: true, max_tokens: 5 }), ['Connection: close']));
      const answer = await c.answer();
      assert.equal(answer.status, 200);
      assert.equal(answer.headers['transfer-encoding'], 'chunked');
      assert.equal(answer.headers.connection, 'close');
      assert.match(answer.headers['content-type'] ?? '', /^text\/event-stream/);
      assert.ok(String(answer.body).trimEnd().endsWith('data: [DONE]'), String(answer.body));
      assert.equal(await c.closesWithin(10_000), true, 'the router closed the connection');
    } finally {
      c.destroy();
    }
  });

  test('requests outside the strict subset get node:http answers: chunked body, split head, bad head', async () => {
    const r = shared;
    const before = await fastPathCounts(r);
    const body = chat('m');
    const chunked = await RawClient.connect(r.port);
    const splitHead = await RawClient.connect(r.port);
    const bad = await RawClient.connect(r.port);
    try {
      chunked.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      );
      assert.equal((await chunked.answer()).status, 200);

      const whole = post('/v1/chat/completions', body);
      splitHead.write(whole.slice(0, 12));
      // a head split over two reads: the rest is sent only once the router has read the first piece (a fixed pause
      // was not enough on a busy machine, where both pieces could arrive before the router read either)
      await readByServer(r.proc.child.pid as number, r.port, splitHead.localPort);
      splitHead.write(whole.slice(12));
      assert.equal((await splitHead.answer()).status, 200);

      // obs-fold: node:http refuses it; the answer is the router's OpenAI-shaped 400
      bad.write('POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nX-A: a\r\n folded\r\nContent-Length: 2\r\n\r\n{}');
      const refused = await bad.answer();
      assert.equal(refused.status, 400);
      assert.equal(JSON.parse(String(refused.body)).error.code, 'bad_request');
      const after = await fastPathCounts(r);
      assert.equal(after.answered, before.answered, 'none of them was answered by the fast path');
      assert.ok(after.handedOver - before.handedOver >= 3, `three connections handed over, saw ${after.handedOver - before.handedOver}`);
    } finally {
      for (const c of [chunked, splitHead, bad]) c.destroy();
    }
  });

  test('a body that stops arriving gets 408 client_timeout and the connection is closed', async () => {
    const r = shared;
    const c = await RawClient.connect(r.port);
    try {
      const whole = post('/v1/chat/completions', chat('m'));
      c.write(whole.slice(0, whole.length - 3));
      const answer = await c.answer(10_000);
      assert.equal(answer.status, 408);
      assert.equal(JSON.parse(String(answer.body)).error.code, 'client_timeout');
      assert.equal(await c.closesWithin(10_000), true);
    } finally {
      c.destroy();
    }
  });

  test('the API-key gate holds on the fast path', async () => {
    const r = keyed;
    const c = await RawClient.connect(r.port);
    try {
      c.write(post('/v1/chat/completions', chat('m')));
      const refused = await c.answer();
      assert.equal(refused.status, 401);
      assert.equal(JSON.parse(String(refused.body)).error.code, 'invalid_api_key');
      c.write(post('/v1/chat/completions', chat('m'), ['Authorization: Bearer k']));
      assert.equal((await c.answer()).status, 200);
    } finally {
      c.destroy();
    }
  });

  test('with and without --fast-path, the same requests get the same status, headers and body', async () => {
    const fast = shared;
    const fastBefore = await fastPathCounts(fast);
    const requests = [
      post('/v1/chat/completions', chat('m'), ['X-Request-Id: same']),
      post('/v1/completions', JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 3 }), ['X-Request-Id: same']),
      post('/v1/chat/completions', chat('nope'), ['X-Request-Id: same']),
      post('/v1/chat/completions', '{"model":', ['X-Request-Id: same']),
      post('/v1/chat/completions', '{}', ['X-Request-Id: same']),
      post('/v1/chat/completions', chat('m', { stream: true, max_tokens: 3 }), ['X-Request-Id: same']),
    ];
    const comparable = (a: RawAnswer) => {
      const { date: _date, 'keep-alive': _ka, ...headers } = a.headers;
      // the simulator's completion ids and timestamps differ per answer
      return { status: a.status, headers, body: String(a.body).replace(/"(id|created)":("[^"]*"|\d+)/g, '"$1":0') };
    };
    for (const text of requests) {
      const answers: ReturnType<typeof comparable>[] = [];
      for (const r of [fast, slow]) {
        const c = await RawClient.connect(r.port);
        try {
          c.write(text);
          answers.push(comparable(await c.answer()));
        } finally {
          c.destroy();
        }
      }
      assert.deepEqual(answers[0], answers[1], text.split('\r\n')[0]);
    }
    // the comparison is between the two paths: the fast router answered every request itself
    assert.equal((await fastPathCounts(fast)).answered - fastBefore.answered, requests.length);
    assert.deepEqual(await fastPathCounts(slow), { answered: 0, handedOver: 0 });
  });
});
