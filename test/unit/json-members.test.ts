// The byte-preserving JSON member editor behind alias rewrites and the P/D request bodies (issue 15): only the named
// members change; spacing, key order, escapes, unicode and even invalid UTF-8 elsewhere are kept byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { editMembers, memberValue, type MemberEdit } from '../../src/router/proxy/json-members.js';
import { bootstrapBody, kvTransferParamsOf, nixlDecodeBody, nixlPrefillBody } from '../../src/router/proxy/pd/bodies.js';

const edit = (body: string, edits: MemberEdit[]): string => editMembers(Buffer.from(body), edits).toString();

test('replace, add and remove keep every other byte, with odd spacing', () => {
  const body = '{ "a" :1 ,\n\t"stream":true,  "b" : [1, {"stream":2}] ,"c":"x"\r\n}';
  assert.equal(
    edit(body, [
      { key: 'stream', value: 'false' },
      { key: 'new', value: '{"k":null}' },
    ]),
    '{ "a" :1 ,\n\t"stream":false,  "b" : [1, {"stream":2}] ,"c":"x","new":{"k":null}\r\n}',
  );
  assert.equal(edit(body, [{ key: 'stream', value: undefined }]), '{ "a" :1,  "b" : [1, {"stream":2}] ,"c":"x"\r\n}');
  assert.equal(edit(body, [{ key: 'a', value: undefined }]), '{ "stream":true,  "b" : [1, {"stream":2}] ,"c":"x"\r\n}');
  assert.equal(edit(body, [{ key: 'c', value: undefined }]), '{ "a" :1 ,\n\t"stream":true,  "b" : [1, {"stream":2}]\r\n}');
  assert.equal(edit('{"a":1}', [{ key: 'a', value: undefined }]), '{}');
  assert.equal(edit('{ }', [{ key: 'a', value: '1' }]), '{"a":1 }');
  assert.equal(
    edit('{"a":1,"b":2,"c":3}', [
      { key: 'a', value: undefined },
      { key: 'b', value: undefined },
      { key: 'd', value: '4' },
    ]),
    '{"c":3,"d":4}',
  );
  assert.equal(
    edit('{"a":1,"b":2,"c":3}', [
      { key: 'b', value: undefined },
      { key: 'c', value: undefined },
      { key: 'd', value: '4' },
    ]),
    '{"a":1,"d":4}',
  );
  assert.equal(edit('{"a":1}', [{ key: 'x', value: '1', ifPresent: true }]), '{"a":1}');
});

test('escaped keys and duplicates follow JSON.parse: the last duplicate is replaced, every duplicate is removed', () => {
  assert.equal(
    edit('{"str\\u0065am":true,"x":1,"stream":true}', [{ key: 'stream', value: 'false' }]),
    '{"str\\u0065am":true,"x":1,"stream":false}',
  );
  assert.equal(edit('{"stream":1,"x":1,"stream":2}', [{ key: 'stream', value: undefined }]), '{"x":1}');
  assert.deepEqual(memberValue(Buffer.from('{"k":1,"k" : {"a":"}"} }'), 'k')?.toString(), '{"a":"}"}');
});

test('unicode and bytes that are not UTF-8 are kept as they are', () => {
  const body = Buffer.concat([
    Buffer.from('{"prompt":"héllo → 世界 🎉 '),
    Buffer.from([0xff, 0xfe, 0xc3]),
    Buffer.from('","stream_options":{"include_usage":true},"model":"m"}'),
  ]);
  const out = editMembers(body, [
    { key: 'stream_options', value: undefined },
    { key: 'bootstrap_host', value: JSON.stringify('ホスト') },
  ]);
  assert.deepEqual(
    out,
    Buffer.concat([
      Buffer.from('{"prompt":"héllo → 世界 🎉 '),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('","model":"m","bootstrap_host":"ホスト"}'),
    ]),
  );
});

test('property: the edited body parses to the object with exactly the edits applied', () => {
  const key = fc.constantFrom('stream', 'max_tokens', 'min_tokens', 'model', 'kv_transfer_params', 'x');
  fc.assert(
    fc.property(
      fc.dictionary(fc.oneof(key, fc.string()), fc.jsonValue()),
      fc.array(fc.record({ key, value: fc.option(fc.jsonValue(), { nil: undefined }) }), { maxLength: 4 }),
      fc.constantFrom(0, 1, 2),
      (object, edits, indent) => {
        const text = JSON.stringify(object, null, indent);
        const expected = JSON.parse(text) as Record<string, unknown>;
        const byKey = new Map(edits.map((e) => [e.key, e]));
        for (const e of byKey.values()) {
          if (e.value === undefined) delete expected[e.key];
          else expected[e.key] = JSON.parse(JSON.stringify(e.value));
        }
        const out = editMembers(
          Buffer.from(text),
          edits.map((e) => ({ key: e.key, value: e.value === undefined ? undefined : JSON.stringify(e.value) })),
        );
        assert.deepEqual(JSON.parse(out.toString()), expected);
      },
    ),
    { numRuns: 400 },
  );
});

test('vllm-nixl prefill body: kv_transfer_params, stream false, no stream_options, one token, no min_tokens', () => {
  const client =
    '{"model":"m", "messages":[{"role":"user","content":"é"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"max_completion_tokens":64,"min_tokens":4,"temperature":0}';
  assert.equal(
    nixlPrefillBody(Buffer.from(client), '/v1/chat/completions').toString(),
    '{"model":"m", "messages":[{"role":"user","content":"é"}],"stream":false,"max_tokens":1,"max_completion_tokens":1,"temperature":0,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}',
  );
  // no limits given: max_tokens is added, max_completion_tokens is not
  const minimal = JSON.parse(nixlPrefillBody(Buffer.from('{"model":"m","prompt":"x"}'), '/v1/completions').toString());
  assert.deepEqual(Object.keys(minimal), ['model', 'prompt', 'kv_transfer_params', 'stream', 'max_tokens']);
  assert.equal(minimal.max_tokens, 1);
  // /v1/responses limits max_output_tokens instead
  const responses = JSON.parse(
    nixlPrefillBody(Buffer.from('{"model":"m","input":"x","max_output_tokens":99}'), '/v1/responses').toString(),
  );
  assert.equal(responses.max_output_tokens, 1);
  assert.equal(responses.max_tokens, undefined);
});

test('vllm-nixl decode body: the client body plus the prefill answer kv_transfer_params, bytes unchanged', () => {
  const answer = Buffer.from('{"id":"x","kv_transfer_params": {"remote_block_ids":[1, 2],"remote_host":"10.0.0.1" ,"x":1e3},"usage":{}}');
  const params = kvTransferParamsOf(answer);
  assert.equal(params?.toString(), '{"remote_block_ids":[1, 2],"remote_host":"10.0.0.1" ,"x":1e3}');
  const client = '{"model":"m","stream":true,"kv_transfer_params":"client value"}';
  assert.equal(
    nixlDecodeBody(Buffer.from(client), params as Buffer).toString(),
    '{"model":"m","stream":true,"kv_transfer_params":{"remote_block_ids":[1, 2],"remote_host":"10.0.0.1" ,"x":1e3}}',
  );
  assert.equal(kvTransferParamsOf(Buffer.from('{"kv_transfer_params":null}')), undefined);
  assert.equal(kvTransferParamsOf(Buffer.from('not json')), undefined);
});

test('sglang body: bootstrap host, port and room added (replacing what the client sent), rooms beyond 2^53 exact', () => {
  const room = (1n << 63n) - 1n;
  const out = bootstrapBody(Buffer.from('{"model":"m","bootstrap_room":1,"text":"日本"}'), '10.0.0.7', 8998, room).toString();
  assert.equal(out, `{"model":"m","bootstrap_room":${room},"text":"日本","bootstrap_host":"10.0.0.7","bootstrap_port":8998}`);
});
