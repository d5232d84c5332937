// The flow of a request: its tenant (key, fairness id, default) and its priority (header, key's default, clamped to the
// key's max_priority), or the 400 it is answered with.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { keyTenant, parseApiKeysFile, plainKeyEntry, type KeyEntry } from '../../src/router/config/api-keys-file.js';
import { DEFAULT_FLOW, type FlowIdentity } from '../../src/router/core/flow.js';
import type { RouterError } from '../../src/router/server/errors.js';
import { flowOf, parsePriority } from '../../src/router/server/flow-identity.js';

const FID = 'x-gateway-inference-fairness-id';
const PRIO = 'x-llm-router-priority';

const [acme, gateway, capped] = parseApiKeysFile(
  [
    '- key: k-acme',
    '  tenant: acme',
    '  priority: 5',
    '  max_priority: 10',
    '- key: k-gw',
    '  tenant: gw',
    '  priority: 1',
    '  max_priority: 3',
    '  trusted: true',
    '- key: k-capped',
    '  priority: -2',
    '  max_priority: -1',
  ].join('\n'),
).map((k) => k.entry) as [KeyEntry, KeyEntry, KeyEntry];
const plain = plainKeyEntry('k-plain');

function flow(headers: IncomingHttpHeaders, key?: KeyEntry): FlowIdentity {
  const r = flowOf(headers, key);
  assert.ok(!('status' in r), `a flow, not ${JSON.stringify(r)}`);
  return r;
}

function refused(headers: IncomingHttpHeaders, key?: KeyEntry): RouterError {
  const r = flowOf(headers, key);
  assert.ok('status' in r, `refused, not ${JSON.stringify(r)}`);
  return r;
}

test('no keys: the fairness id names the tenant; none (or empty) is the default flow', () => {
  assert.equal(flow({}), DEFAULT_FLOW, 'the one default object, no copy');
  assert.deepEqual(DEFAULT_FLOW, { tenant: 'default', priority: 0 });
  assert.deepEqual(flow({ [FID]: 'team-a' }), { tenant: 'team-a', priority: 0 });
  assert.deepEqual(flow({ [FID]: '' }), DEFAULT_FLOW);
  assert.deepEqual(flow({ [FID]: 'a b/c:d@e' }), { tenant: 'a b/c:d@e', priority: 0 });
  assert.deepEqual(flow({ [FID]: 'x'.repeat(128) }), { tenant: 'x'.repeat(128), priority: 0 });
  assert.deepEqual(flow({ [FID]: 'default' }), DEFAULT_FLOW);
});

test('a fairness id that is not 1..128 printable ASCII: 400 invalid_fairness_id naming the header', () => {
  for (const [bad, detail] of [
    ['x'.repeat(129), /it is 129 characters long/],
    ['caf\u00e9', /got "caf\u00e9"/],
    ['tab\there', /got "tab\\there"/],
    [' lead', /got " lead"/],
    [['a', 'b'], /sent more than once/],
  ] as const) {
    const e = refused({ [FID]: bad as string });
    assert.equal(e.status, 400);
    assert.equal(e.code, 'invalid_fairness_id');
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.param, FID);
    assert.match(e.message, /^The x-gateway-inference-fairness-id header must be 1 to 128 printable ASCII characters/);
    assert.match(e.message, detail);
  }
  // a long one is not echoed whole
  assert.ok(refused({ [FID]: `${'y'.repeat(200)}\u0001` }).message.length < 250);
});

test('with keys: the key’s tenant and priority; another key’s fairness id is ignored, even a bad one', () => {
  assert.equal(flow({}, acme), acme.flow, 'the key’s own object, no copy');
  assert.deepEqual(acme.flow, { tenant: 'acme', priority: 5 });
  assert.equal(flow({ [FID]: 'someone-else' }, acme), acme.flow);
  assert.equal(flow({ [FID]: 'x'.repeat(500) }, acme), acme.flow);
  assert.deepEqual(flow({}, plain), { tenant: keyTenant('k-plain'), priority: 0 });
  assert.equal(flow({ [FID]: 'b' }, plain), plain.flow);
});

test('a trusted key (a gateway’s): the fairness id names the tenant, else the key’s own; a bad one is refused', () => {
  assert.deepEqual(flow({ [FID]: 'tenant-b' }, gateway), { tenant: 'tenant-b', priority: 1 });
  assert.equal(flow({}, gateway), gateway.flow);
  assert.equal(flow({ [FID]: '' }, gateway), gateway.flow);
  assert.deepEqual(gateway.flow, { tenant: 'gw', priority: 1 });
  assert.equal(refused({ [FID]: 'z'.repeat(129) }, gateway).code, 'invalid_fairness_id');
  // priority from the header, still capped by the gateway key's max_priority
  assert.deepEqual(flow({ [FID]: 'tenant-b', [PRIO]: '7' }, gateway), { tenant: 'tenant-b', priority: 3 });
  assert.deepEqual(flow({ [FID]: 'tenant-b', [PRIO]: '-4' }, gateway), { tenant: 'tenant-b', priority: -4 });
});

test('priority: the header, else the key’s priority, else 0; lowered to the key’s max_priority, never raised', () => {
  assert.deepEqual(flow({ [PRIO]: '10' }), { tenant: 'default', priority: 10 });
  assert.deepEqual(flow({ [PRIO]: '-1' }), { tenant: 'default', priority: -1 }, 'negative: sheddable');
  assert.deepEqual(flow({ [PRIO]: '1000', [FID]: 't' }), { tenant: 't', priority: 1000 });
  assert.deepEqual(flow({ [PRIO]: '-1000' }), { tenant: 'default', priority: -1000 });
  assert.equal(flow({ [PRIO]: '0' }), DEFAULT_FLOW);
  assert.deepEqual(flow({ [PRIO]: '8' }, acme), { tenant: 'acme', priority: 8 });
  assert.deepEqual(flow({ [PRIO]: '10' }, acme), { tenant: 'acme', priority: 10 });
  assert.deepEqual(flow({ [PRIO]: '11' }, acme), { tenant: 'acme', priority: 10 }, 'clamped to max_priority');
  assert.deepEqual(flow({ [PRIO]: '1000' }, acme), { tenant: 'acme', priority: 10 });
  assert.deepEqual(flow({ [PRIO]: '-50' }, acme), { tenant: 'acme', priority: -50 }, 'lower is always allowed');
  assert.equal(flow({ [PRIO]: '5' }, acme), acme.flow);
  assert.deepEqual(flow({}, capped), { tenant: keyTenant('k-capped'), priority: -2 });
  assert.deepEqual(flow({ [PRIO]: '100' }, capped), { tenant: keyTenant('k-capped'), priority: -1 }, 'a sheddable-only key stays so');
  assert.deepEqual(flow({ [PRIO]: '1000' }, plain), { tenant: keyTenant('k-plain'), priority: 1000 }, 'a plain key has no cap');
});

test('a priority that is not an integer from -1000 to 1000: 400 invalid_priority, with or without a key', () => {
  for (const bad of ['', 'high', '1.5', '1e2', '0x10', '1001', '-1001', '99999999999999999999', '--1', '+', '-', ' 5', '5 ', '1,2']) {
    for (const key of [undefined, acme, gateway]) {
      const e = refused({ [PRIO]: bad }, key);
      assert.equal(e.status, 400, bad);
      assert.equal(e.code, 'invalid_priority');
      assert.equal(e.type, 'invalid_request_error');
      assert.equal(e.param, PRIO);
      assert.match(e.message, /^The x-llm-router-priority header must be an integer from -1000 to 1000: got ".*"\.$/);
    }
  }
  assert.match(refused({ [PRIO]: ['1', '2'] }).message, /sent more than once/);
  assert.ok(refused({ [PRIO]: '9'.repeat(5000) }).message.length < 150, 'a long value is not echoed whole');
  // a bad priority is refused even when the fairness id is fine, and a bad fairness id first
  assert.equal(refused({ [FID]: 't', [PRIO]: 'x' }).code, 'invalid_priority');
  assert.equal(refused({ [FID]: '\u00ff', [PRIO]: 'x' }).code, 'invalid_fairness_id');
});

test('parsePriority: sign, leading zeros, bounds, and -0 is 0', () => {
  assert.equal(parsePriority('7'), 7);
  assert.equal(parsePriority('+7'), 7);
  assert.equal(parsePriority('-7'), -7);
  assert.equal(parsePriority('007'), 7);
  assert.equal(parsePriority('001000'), 1000);
  assert.equal(parsePriority('0001000'), undefined, 'more than 6 digits');
  assert.ok(Object.is(parsePriority('-0'), 0));
  assert.equal(parsePriority('-1000'), -1000);
  assert.equal(parsePriority('1001'), undefined);
  assert.equal(parsePriority('٣'), undefined, 'ASCII digits only');
});
