// llm_router_time_to_first_byte_seconds: from a request's admission to the first body byte the client is sent,
// streams included (their first event, not the head and not the end), per model like the other request metrics; on
// both inbound paths. The engine is a raw socket whose stream sends its first event after a pause and ends later.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from '../support/process.js';
import { RawEngine } from '../support/raw-engine.js';
import { call, chat, startRouter, waitModelStatus, type Running } from '../support/router.js';

const MODEL = 'ttfb';
const FIRST_MS = 300;
const END_MS = 1_500;

async function samples(router: Running, name: string): Promise<Map<string, number>> {
  const text = (await call(`${router.url}/metrics`)).text;
  const out = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^(${name}_(?:sum|count|bucket)\\{[^}]*\\}) (\\S+)$`, 'gm')))
    out.set(m[1] as string, Number(m[2]));
  return out;
}

describe('llm_router_time_to_first_byte_seconds', { timeout: 60_000 }, () => {
  let engine: RawEngine;
  const routers: { name: string; router: Running }[] = [];

  before(async () => {
    engine = await RawEngine.start([MODEL]);
    engine.cases.set('slow-stream', (s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
      setTimeout(() => s.write('f\r\ndata: {"n":1}\n\n\r\n'), FIRST_MS);
      setTimeout(() => s.write('e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n'), END_MS);
    });
    for (const [name, args] of [
      ['fast path', []],
      ['node:http', ['--fast-path', 'false']],
    ] as const) {
      const router = await startRouter(['--static-backends', engine.origin, '--static-models', MODEL, '--probe-interval', '0.2', ...args]);
      routers.push({ name, router });
      await waitModelStatus(router.url, MODEL, 'ready');
    }
  });
  after(async () => {
    await stopAll();
    await engine?.close();
  });

  test('a stream is measured at its first event, a JSON answer and a router error at their body; labelled by model', async () => {
    for (const { name, router } of routers) {
      const res = await call(`${router.url}/v1/chat/completions`, {
        body: chat(MODEL, { stream: true }),
        headers: { 'x-case': 'slow-stream' },
      });
      assert.equal(res.status, 200, name);
      let s = await samples(router, 'llm_router_time_to_first_byte_seconds');
      assert.equal(s.get(`llm_router_time_to_first_byte_seconds_count{model="${MODEL}"}`), 1, `${name}: ${JSON.stringify([...s])}`);
      const sum = s.get(`llm_router_time_to_first_byte_seconds_sum{model="${MODEL}"}`) as number;
      assert.ok(
        sum >= FIRST_MS / 1000 && sum < END_MS / 1000,
        `${name}: the first event (${FIRST_MS} ms), not the end (${END_MS} ms): ${sum}`,
      );
      // the stream's whole duration is the other histogram's
      const duration = await samples(router, 'llm_router_request_duration_seconds');
      assert.ok((duration.get(`llm_router_request_duration_seconds_sum{model="${MODEL}"}`) as number) >= END_MS / 1000, name);
      assert.equal(s.get(`llm_router_time_to_first_byte_seconds_bucket{le="+Inf",model="${MODEL}"}`), 1, name);

      assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL) })).status, 200);
      assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('no-such-model') })).status, 404);
      s = await samples(router, 'llm_router_time_to_first_byte_seconds');
      assert.equal(s.get(`llm_router_time_to_first_byte_seconds_count{model="${MODEL}"}`), 2, name);
      assert.equal(s.get('llm_router_time_to_first_byte_seconds_count{model="__unknown__"}'), 1, `${name}: unknown names share one label`);
    }
  });
});
