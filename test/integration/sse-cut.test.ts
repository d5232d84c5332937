// An engine that dies in the middle of a server-sent event: cut at every byte offset of an event (LF and CRLF line
// ends), the client's spec-following parse (the WHATWG rules) yields the earlier events intact and then the router's
// error event, never the engine's half event glued to it. The engine is a raw socket (test/support/raw-engine.ts) that
// writes its stream in pieces and then closes; both inbound paths run (the fast path and node:http).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import { stopAll } from '../support/process.js';
import { RawEngine } from '../support/raw-engine.js';
import { RawClient } from '../support/raw-http.js';
import { startRouter, waitModelStatus, type Running } from '../support/router.js';

const MODEL = 'sse';

/** What a spec-following client dispatches: the WHATWG event stream interpretation, with the end of the stream. */
function parseEventStream(text: string): { event: string; data: string }[] {
  const events: { event: string; data: string }[] = [];
  const lines = text.split(/\r\n|\r|\n/);
  // the last piece is an unterminated line (or '' after a final line end): the stream ended, it is discarded
  lines.pop();
  let data = '';
  let type = '';
  for (const line of lines) {
    if (line === '') {
      if (data !== '') events.push({ event: type || 'message', data: data.endsWith('\n') ? data.slice(0, -1) : data });
      data = '';
      type = '';
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data += `${value}\n`;
    else if (field === 'event') type = value;
  }
  // an event not ended by a blank line when the stream ends is discarded
  return events;
}

const FIRST = { id: 'c1', choices: [{ index: 0, delta: { content: 'Hel' } }] };
const SECOND = { id: 'c1', choices: [{ index: 0, delta: { content: 'lo, wörld' } }] };
const STYLES = {
  lf: (o: unknown) => `data: ${JSON.stringify(o)}\n\n`,
  crlf: (o: unknown) => `data: ${JSON.stringify(o)}\r\n\r\n`,
  // a named event, a comment and an id: every line kind
  mixed: (o: unknown) => `: note\nevent: message\nid: 7\ndata: ${JSON.stringify(o)}\n\n`,
} as const;

function errorCode(data: string | undefined): string | undefined {
  try {
    return (JSON.parse(data ?? '') as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

function chunk(bytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);
}

describe('an engine cut in the middle of an event', { timeout: 300_000 }, () => {
  let engine: RawEngine;
  const routers: { name: string; router: Running }[] = [];

  before(async () => {
    engine = await RawEngine.start([MODEL]);
    // x-case: cut-STYLE-K: the first event whole, then K bytes of the second in a read of their own, then the end
    for (const [style, render] of Object.entries(STYLES)) {
      const second = Buffer.from(render(SECOND));
      for (let k = 0; k < second.length; k++) {
        engine.cases.set(`cut-${style}-${k}`, (s: net.Socket) => {
          s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
          s.write(chunk(Buffer.from(render(FIRST))));
          setTimeout(() => {
            // the partial event in a chunk that never ends: the engine dies mid-chunk and mid-event
            if (k > 0) s.write(Buffer.concat([Buffer.from(`${second.length.toString(16)}\r\n`), second.subarray(0, k)]));
            setTimeout(() => s.destroy(), 15);
          }, 15);
        });
      }
    }
    for (const [name, args] of [
      ['fast path', []],
      ['node:http', ['--fast-path', 'false']],
    ] as const) {
      const router = await startRouter([
        '--static-backends',
        engine.origin,
        '--static-models',
        MODEL,
        '--passive-failure-threshold',
        '100000',
        '--probe-interval',
        '0.2',
        ...args,
      ]);
      routers.push({ name, router });
      await waitModelStatus(router.url, MODEL, 'ready');
    }
  });
  after(async () => {
    await stopAll();
    await engine?.close();
  });

  test('at every byte offset: the earlier events intact, then the error event', async () => {
    const body = JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    for (const { name, router } of routers) {
      const client = await RawClient.connect(router.port);
      let broken: string[] = [];
      for (const [style, render] of Object.entries(STYLES)) {
        const length = Buffer.byteLength(render(SECOND));
        for (let k = 0; k < length; k++) {
          const kase = `cut-${style}-${k}`;
          await client.write(
            `POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\ncontent-type: application/json\r\nx-case: ${kase}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          );
          const answer = await client.answer(10_000);
          assert.equal(answer.status, 200, kase);
          assert.equal(answer.truncated, false, `${kase}: the stream is ended by the router, not cut`);
          const text = answer.body.toString('utf8');
          const events = parseEventStream(text);
          // the events the engine completed before it died (a CR alone ends a line: "\r\n\r" ends the second event)
          const sent = parseEventStream(render(FIRST) + Buffer.from(render(SECOND)).subarray(0, k).toString('utf8'));
          const ok =
            events.length === sent.length + 1 &&
            sent.every((e, i) => events[i]?.data === e.data && events[i]?.event === e.event) &&
            errorCode(events.at(-1)?.data) === 'upstream_stream_error';
          if (!ok) broken.push(`${kase}: ${JSON.stringify(text)}`);
        }
      }
      client.destroy();
      assert.deepEqual(broken, [], `${name}: ${broken.length} cut offsets gave a broken parse`);
      broken = [];
    }
  });
});
