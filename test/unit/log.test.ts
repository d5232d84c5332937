// Text logs carry engines' error texts: whatever they hold, one record stays one line with no control character in it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { createLogger } from '../../src/router/util/log.js';

function textLog(): { log: ReturnType<typeof createLogger>; lines: () => string[] } {
  const out = new PassThrough();
  let text = '';
  out.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  return { log: createLogger({ level: 'info', format: 'text', out }), lines: () => text.split('\n').slice(0, -1) };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is looked for
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

test('text logs: an engine error text with newlines, escapes and control characters stays on its line, escaped', () => {
  const { log, lines } = textLog();
  const forged = 'boom\n2026-01-01T00:00:00.000Z INFO  admin logged in user=root';
  const terminal = 'red\u001b[31mALERT\u0007\u0085\u2028end';
  log.warn({ endpoint: 'http://e:8000', reason: forged, detail: terminal, bare: 'x\u001b[2J', nested: { why: forged } }, forged);
  log.info({ plain: 'word', spaced: 'two words' }, 'ok');
  const got = lines();
  assert.equal(got.length, 2, got.join('\n'));
  for (const l of got) assert.doesNotMatch(l, CONTROL, JSON.stringify(l));
  const [warn, info] = got as [string, string];
  assert.match(warn, / WARN {2}boom\\u000a2026-01-01T00:00:00\.000Z INFO {2}admin logged in user=root /);
  assert.match(warn, / reason="boom\\n2026/);
  assert.match(warn, / detail="red\\u001b\[31mALERT\\u0007\\u0085\\u2028end"/);
  assert.match(warn, / bare="x\\u001b\[2J"/, 'a value with a control character but no blank is quoted too');
  assert.match(warn, / nested=\{"why":"boom\\n2026/);
  // ordinary values read as before
  assert.match(info, / INFO {2}ok plain=word spaced="two words"$/);
});
