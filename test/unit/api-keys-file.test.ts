// The --api-keys-file's two forms (plain lines, YAML entries), how the form is told, and the entries it refuses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isYamlKeysFile, keyTenant, parseApiKeysFile, plainKeyEntry } from '../../src/router/config/api-keys-file.js';
import { PRIORITY_MAX } from '../../src/router/core/flow.js';

const SECRET = 'sk-very-secret-0123456789';

/** the error message parsing `text` throws; fails when it throws none */
function refusal(text: string): string {
  try {
    parseApiKeysFile(text);
  } catch (err) {
    const message = (err as Error).message;
    assert.ok(!message.includes(SECRET), `the error shows no key: ${message}`);
    return message;
  }
  assert.fail(`accepted: ${text}`);
}

test('a key with no entry of its own is its own tenant, named from its SHA-256, never the key', () => {
  const tenant = keyTenant(SECRET);
  assert.equal(tenant, `key-${createHash('sha256').update(SECRET).digest('hex').slice(0, 8)}`);
  assert.match(tenant, /^key-[0-9a-f]{8}$/);
  assert.ok(!tenant.includes(SECRET.slice(0, 6)));
  assert.equal(keyTenant(SECRET), tenant, 'stable');
  assert.notEqual(keyTenant(`${SECRET}x`), tenant);
  const e = plainKeyEntry(SECRET);
  assert.deepEqual(
    { ...e, flow: { ...e.flow } },
    {
      tenant,
      priority: 0,
      maxPriority: PRIORITY_MAX,
      trusted: false,
      flow: { tenant, priority: 0 },
    },
  );
});

test('plain lines: one key per line, trimmed, # comments and blank lines skipped', () => {
  const keys = parseApiKeysFile('# clients\n\n  k-one  \r\nk-two\n# k-not\nk:three\n-dash-key\n');
  assert.deepEqual(
    keys.map((k) => k.key),
    ['k-one', 'k-two', 'k:three', '-dash-key'],
  );
  assert.deepEqual(
    keys.map((k) => k.entry.tenant),
    ['k-one', 'k-two', 'k:three', '-dash-key'].map(keyTenant),
  );
  assert.deepEqual(parseApiKeysFile(''), []);
  assert.deepEqual(parseApiKeysFile('# only a comment\n'), []);
});

test('YAML entries: key required; tenant, priority, max_priority, trusted with their defaults', () => {
  const keys = parseApiKeysFile(
    [
      '# tenants',
      '- key: k-acme',
      '  tenant: acme',
      '  priority: 5',
      '  max_priority: 10',
      '- key: k-gateway',
      '  tenant: gateway',
      '  trusted: true',
      '- key: "12345"',
      '- k-bare',
      '- { key: k-low, priority: -3, max_priority: -3 }',
      '',
    ].join('\n'),
  );
  assert.deepEqual(
    keys.map(({ key, entry }) => ({ key, ...entry, flow: { ...entry.flow } })),
    [
      { key: 'k-acme', tenant: 'acme', priority: 5, maxPriority: 10, trusted: false, flow: { tenant: 'acme', priority: 5 } },
      {
        key: 'k-gateway',
        tenant: 'gateway',
        priority: 0,
        maxPriority: PRIORITY_MAX,
        trusted: true,
        flow: { tenant: 'gateway', priority: 0 },
      },
      {
        key: '12345',
        tenant: keyTenant('12345'),
        priority: 0,
        maxPriority: PRIORITY_MAX,
        trusted: false,
        flow: { tenant: keyTenant('12345'), priority: 0 },
      },
      {
        key: 'k-bare',
        tenant: keyTenant('k-bare'),
        priority: 0,
        maxPriority: PRIORITY_MAX,
        trusted: false,
        flow: { tenant: keyTenant('k-bare'), priority: 0 },
      },
      {
        key: 'k-low',
        tenant: keyTenant('k-low'),
        priority: -3,
        maxPriority: -3,
        trusted: false,
        flow: { tenant: keyTenant('k-low'), priority: -3 },
      },
    ],
  );
  // two keys may share a tenant; a flow list
  const shared = parseApiKeysFile('[{key: a1, tenant: t}, {key: a2, tenant: t}]');
  assert.deepEqual(
    shared.map((k) => [k.key, k.entry.tenant]),
    [
      ['a1', 't'],
      ['a2', 't'],
    ],
  );
  assert.deepEqual(parseApiKeysFile('[]'), []);
  assert.deepEqual(
    parseApiKeysFile('---\n- key: d\n').map((k) => k.key),
    ['d'],
  );
});

test('the form: YAML when the first line (comments aside) starts a list, a document or a mapping; plain lines else', () => {
  for (const yaml of [
    '- key: a',
    '# c\n\n- key: a',
    '-\n  key: a',
    '[{key: a}]',
    '{key: a}',
    '---\n- key: a',
    '%YAML 1.2\n---\n[]',
    'keys:\n  - a',
  ])
    assert.equal(isYamlKeysFile(yaml), true, yaml);
  for (const plain of ['abc', '# c\nabc', '-abc', 'sk:abc', 'a b', '', '# only']) assert.equal(isYamlKeysFile(plain), false, plain);
});

test('a malformed entry is refused, named by its number, line and tenant, never by its key', () => {
  const cases: [string, RegExp][] = [
    [
      `- key: ${SECRET}\n  tenant: acme\n  priority: high\n`,
      /^entry 1 at line 1 \(tenant "acme"\): priority must be an integer from -1000 to 1000$/,
    ],
    [`- key: k0\n- key: ${SECRET}\n  priority: 1001\n`, /^entry 2 at line 2: priority must be an integer from -1000 to 1000$/],
    [`- key: ${SECRET}\n  priority: 1.5\n`, /priority must be an integer/],
    [`- key: ${SECRET}\n  max_priority: -1001\n`, /entry 1 at line 1: max_priority must be an integer/],
    [`- key: ${SECRET}\n  priority: 5\n  max_priority: 2\n`, /entry 1 at line 1: priority 5 is above max_priority 2/],
    [`- key: ${SECRET}\n  trusted: yes\n`, /entry 1 at line 1: trusted must be true or false/],
    [`- key: ${SECRET}\n  tenant: ""\n`, /entry 1 at line 1: tenant must be 1 to 128 printable ASCII/],
    [`- key: ${SECRET}\n  tenant: "${'t'.repeat(129)}"\n`, /tenant must be 1 to 128/],
    [`- key: ${SECRET}\n  tenant: "caf\u00e9"\n`, /tenant must be 1 to 128 printable ASCII/],
    [`- key: ${SECRET}\n  tenant: 42\n`, /tenant must be/],
    [
      `- key: ${SECRET}\n  max_prio: 3\n`,
      /entry 1 at line 1: unknown field "max_prio" \(the fields are key, tenant, priority, max_priority, trusted\)/,
    ],
    [`- tenant: acme\n  ${SECRET}: x\n`, /entry 1 at line 1 \(tenant "acme"\): unknown field \(the fields/],
    ['- tenant: acme\n', /entry 1 at line 1 \(tenant "acme"\): no key/],
    ['- key: 12345\n', /the key must be a non-empty string .*quote a key that YAML reads as a number/],
    ['- key: "  "\n', /the key must be a non-empty string/],
    ['- key: "a\\tb"\n', /without control characters/],
    ['- key: [a]\n', /the key must be a non-empty string/],
    ['-\n', /entry 1 at line 1: an entry is a mapping/],
    ['- [a, b]\n', /entry 1 at line 1: an entry is a mapping/],
    [`- key: ${SECRET}\n- key: x\n- key: ${SECRET}\n  tenant: t3\n`, /^entry 3 at line 3 \(tenant "t3"\): the same key as entry 1$/],
    [`- key: ${SECRET}\n  key: other\n`, /^not valid YAML at line 2 \(duplicate key\)$/],
    [`- key: ${SECRET}: x\n`, /^not valid YAML at line 1 /],
    [`- key: ${SECRET}\n bad indent: [\n`, /^not valid YAML at line \d/],
    [`key: ${SECRET}\n`, /^a YAML keys file is a list of entries/],
    [`- key: a\n---\n- key: ${SECRET}\n`, /^not valid YAML/],
    [`- key: *${SECRET}\n`, /^not valid YAML: an alias \(\*name\) with no anchor/],
  ];
  for (const [text, want] of cases) assert.match(refusal(text), want, text);
});

test('the example in docs/operations.md parses as it says', () => {
  const doc = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'operations.md'), 'utf8');
  const from = doc.indexOf('```yaml', doc.indexOf('**The keys file.**'));
  const example = doc.slice(from + '```yaml\n'.length, doc.indexOf('```', from + 7));
  assert.deepEqual(
    parseApiKeysFile(example).map(({ entry: e }) => [e.tenant, e.priority, e.maxPriority, e.trusted]),
    [
      ['acme', 5, 10, false],
      ['acme', -1, 0, false],
      ['gateway', 0, PRIORITY_MAX, true],
      [keyTenant('sk-plain-9c2e...'), 0, PRIORITY_MAX, false],
    ],
  );
});
