// ClientGone (src/router/core/client-gone.ts): the one "client left" signal of a request. It fires at once for a sink
// that is closed already, once for a sink that closes later, never for a sink that finished its answer, and calls
// every subscriber once in order; and lastEventEnd (src/router/proxy/attempt.ts), where an event stream's complete
// events end, under the WHATWG line rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ClientGone } from '../../src/router/core/client-gone.js';
import type { ResponseSink } from '../../src/router/core/exchange.js';
import { lastEventEnd } from '../../src/router/proxy/attempt.js';

function sink(state: { destroyed?: boolean; writableFinished?: boolean } = {}): ResponseSink & EventEmitter {
  const e = new EventEmitter() as EventEmitter & { destroyed: boolean; writableFinished: boolean };
  e.destroyed = state.destroyed ?? false;
  e.writableFinished = state.writableFinished ?? false;
  return e as unknown as ResponseSink & EventEmitter;
}

test('a sink closed before admission: gone at once, a subscriber is called at once', () => {
  const gone = new ClientGone(sink({ destroyed: true }));
  assert.equal(gone.gone, true);
  let calls = 0;
  gone.on(() => calls++);
  assert.equal(calls, 1);
});

test('a sink that closes later: every subscriber once, in order; one that left is not called; a finished answer is no departure', () => {
  const s = sink();
  const gone = new ClientGone(s);
  const seen: string[] = [];
  const a = (): void => void seen.push('a');
  const b = (): void => void seen.push('b');
  const c = (): void => void seen.push('c');
  gone.on(a);
  gone.on(b);
  gone.on(c);
  gone.off(b);
  assert.equal(gone.gone, false);
  s.emit('close');
  s.emit('close');
  assert.deepEqual(seen, ['a', 'c']);
  assert.equal(gone.gone, true);
  assert.equal(s.listenerCount('close'), 0, 'it stops listening once fired');

  const finished = sink();
  const done = new ClientGone(finished);
  let calls = 0;
  done.on(() => calls++);
  (finished as unknown as { writableFinished: boolean }).writableFinished = true;
  finished.emit('close');
  assert.equal(calls, 0);
  assert.equal(done.gone, false);
});

test('race(): resolves gone when the client leaves; cancel() unsubscribes', async () => {
  const s = sink();
  const gone = new ClientGone(s);
  const r = gone.race();
  const other = gone.race();
  other.cancel();
  s.emit('close');
  assert.equal(await r.gone, 'gone');
});

test('lastEventEnd: the end of the last blank line, whatever the line ends; -1 without one', () => {
  const at = (text: string, from = 0): number => lastEventEnd(Buffer.from(text, 'latin1'), from);
  assert.equal(at('data: a\n\n'), 9);
  assert.equal(at('data: a\r\n\r\n'), 11);
  assert.equal(at('data: a\r\r'), 9);
  assert.equal(at('data: a\n\r'), 9, 'LF then a CR that ends the empty line');
  assert.equal(at('data: a\r\n\n'), 10);
  assert.equal(at('data: a\n\ndata: b'), 9);
  assert.equal(at('data: a\n\ndata: b\n'), 9);
  assert.equal(at('data: a\n'), -1);
  assert.equal(at('data: a\r\n'), -1);
  assert.equal(at('data: a\r'), -1);
  assert.equal(at('\n'), -1);
  assert.equal(at('data: a'), -1);
  assert.equal(at('\n\n'), 2);
  // only ends after `from` are looked for
  assert.equal(at('data: a\n\ndata: b', 9), -1);
});
