import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { rewriteModel } from '../../src/router/proxy/rewrite-model.js';

test('only the top-level model value changes; every other byte stays', () => {
  const body = '{ "messages":[{"role":"user","content":"model \\"x\\"","model":"inner"}],\n  "model" : "alias", "n":1}';
  const out = rewriteModel(Buffer.from(body), 'target').toString();
  assert.equal(out, '{ "messages":[{"role":"user","content":"model \\"x\\"","model":"inner"}],\n  "model" : "target", "n":1}');
});

test('escaped key spelling and duplicate keys follow JSON.parse (last wins)', () => {
  const body = '{"m\\u006fdel":"a","x":{"model":"b"},"model":"c"}';
  const out = JSON.parse(rewriteModel(Buffer.from(body), 'z').toString()) as { model: string; x: { model: string } };
  assert.equal(out.model, 'z');
  assert.equal(out.x.model, 'b');
});

test('property: the rewritten body parses to the same object with only model replaced', () => {
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), fc.string(), (rest, model, target) => {
      const text = JSON.stringify({ ...rest, model }, null, 1);
      const expected = JSON.parse(text) as Record<string, unknown>;
      expected.model = target;
      assert.deepEqual(JSON.parse(rewriteModel(Buffer.from(text), target).toString()), expected);
    }),
    { numRuns: 300 },
  );
});

test('bytes that are not valid UTF-8 elsewhere in the body are kept as they are', () => {
  const body = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","model":"a"}')]);
  const out = rewriteModel(body, 'bé');
  assert.deepEqual(out, Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","model":"bé"}')]));
});
