// The small parts of P/D forwarding (issue 15): the held decode answer of an sglang pair, prompt length for
// --pd-min-prompt-chars, bootstrap rooms, and the prefill address the llm-d sidecar dials.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import type { ResponseSink } from '../../src/router/core/exchange.js';
import { GatedSink } from '../../src/router/proxy/pd/gated-sink.js';
import { hostPort } from '../../src/router/proxy/pd/llm-d-sidecar.js';
import { promptChars } from '../../src/router/proxy/pd/prompt-chars.js';
import { bootstrapRoom } from '../../src/router/proxy/pd/sglang.js';

class RecordingSink extends EventEmitter implements ResponseSink {
  statusCode = 200;
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  readonly calls: string[] = [];
  setHeader(name: string, value: string | number): this {
    this.calls.push(`setHeader ${name}=${value}`);
    return this;
  }
  writeHead(status: number): this {
    this.headersSent = true;
    this.calls.push(`writeHead ${status}`);
    return this;
  }
  flushHeaders(): void {
    this.calls.push('flushHeaders');
  }
  write(chunk: Buffer | string): boolean {
    this.calls.push(`write ${chunk}`);
    return true;
  }
  end(chunk?: Buffer | string): this {
    this.writableFinished = true;
    this.calls.push(`end ${chunk ?? ''}`);
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

test('a gated sink holds the decode answer until opened, then writes it in order and passes the rest through', () => {
  const res = new RecordingSink();
  const gate = new GatedSink(res);
  gate.writeHead(200, []);
  gate.flushHeaders();
  assert.equal(gate.write('a'), true);
  assert.equal(gate.headersSent, true);
  assert.deepEqual(res.calls, []);
  gate.open();
  gate.write('b');
  gate.end('c');
  assert.deepEqual(res.calls, ['writeHead 200', 'flushHeaders', 'write a', 'write b', 'end c']);
  gate.release();
});

test('a cancelled gate drops what it held, reports its client gone, and never writes', () => {
  const res = new RecordingSink();
  const gate = new GatedSink(res);
  let closed = 0;
  gate.on('close', () => closed++);
  gate.writeHead(200, []);
  gate.write('token');
  gate.cancel();
  gate.end();
  gate.open();
  assert.equal(closed, 1);
  assert.equal(gate.destroyed, true);
  assert.deepEqual(res.calls, []);
  // the real client leaving reaches the decode call too
  const other = new GatedSink(res);
  let seen = 0;
  other.on('close', () => seen++);
  res.emit('close');
  assert.equal(seen, 1);
  other.release();
  gate.release();
});

test('prompt length in characters, counted up to the limit', () => {
  assert.equal(promptChars({ messages: [{ role: 'user', content: 'hello' }, { content: [{ type: 'text', text: 'abc' }] }] }, 100), 8);
  assert.equal(promptChars({ prompt: 'x'.repeat(50) }, 10), 50);
  assert.equal(promptChars({ prompt: ['ab', 'cd'] }, 100), 4);
  assert.equal(promptChars({ input: 'abc' }, 100), 3);
  assert.equal(promptChars({ messages: [{ content: 'a'.repeat(10) }, { content: 'b' }] }, 5), 10, 'stops once the limit is passed');
  assert.equal(promptChars({}, 10), 0);
});

test('bootstrap rooms are in [0, 2^63) and differ', () => {
  const rooms = new Set<bigint>();
  for (let i = 0; i < 1000; i++) {
    const r = bootstrapRoom();
    assert.ok(r >= 0n && r < 1n << 63n);
    rooms.add(r);
  }
  assert.equal(rooms.size, 1000);
});

test('the sidecar dials the prefill endpoint as IP:PORT', () => {
  const at = (url: string): Endpoint => ({ url }) as Endpoint;
  assert.equal(hostPort(at('http://10.0.0.5:8000')), '10.0.0.5:8000');
  assert.equal(hostPort(at('http://[fd00::5]:8000')), '[fd00::5]:8000');
  assert.equal(hostPort(at('https://prefill.example')), 'prefill.example:443');
});
