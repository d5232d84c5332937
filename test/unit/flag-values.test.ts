import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readValue } from '../../src/router/config/flag-values.js';
import type { FlagSpec } from '../../src/router/config/flags.js';

const spec = (s: Omit<FlagSpec, 'help'>): FlagSpec => ({ help: '', ...s });

function accepts(s: FlagSpec, cases: readonly (readonly [unknown, unknown])[]): void {
  for (const [raw, want] of cases) {
    const r = readValue(s, raw);
    assert.ok(r.ok, `${s.name} ${JSON.stringify(raw)}: ${r.ok ? '' : r.reason}`);
    assert.deepEqual(r.value, want, `${s.name} ${JSON.stringify(raw)}`);
  }
}

function refuses(s: FlagSpec, cases: readonly (readonly [unknown, RegExp])[]): void {
  for (const [raw, reason] of cases) {
    const r = readValue(s, raw);
    assert.equal(r.ok, false, `${s.name} ${JSON.stringify(raw)} is refused`);
    if (!r.ok) assert.match(r.reason, reason, `${s.name} ${JSON.stringify(raw)}`);
  }
}

test('booleans: the words an environment uses, any case and blanks; YAML booleans; nothing else', () => {
  const b = spec({ name: 'b', kind: 'boolean' });
  accepts(b, [
    ['TRUE', true],
    [' yes ', true],
    ['on', true],
    ['1', true],
    ['', true],
    ['off', false],
    ['No', false],
    ['0', false],
    [true, true],
    [false, false],
  ]);
  refuses(b, [
    ['maybe', /^expected true or false, got "maybe"$/],
    [2, /got 2$/],
    [null, /got null$/],
    [['true'], /got \["true"\]$/],
  ]);
});

test('numbers: text or YAML numbers, finite, whole for int, at least min; the raw value is named', () => {
  const port = spec({ name: 'port', kind: 'int', min: 0 });
  accepts(port, [
    ['8001', 8001],
    [' 7 ', 7],
    ['1e3', 1000],
    [0, 0],
  ]);
  refuses(port, [
    ['eighty', /^expected a number, got "eighty"$/],
    ['', /^expected a number, got ""$/],
    ['Infinity', /expected a number/],
    ['1.5', /^expected a whole number, got 1\.5$/],
    [-1, /^must be at least 0, got -1$/],
    [true, /expected a number, got true/],
    [{ n: 1 }, /expected a number/],
  ]);
  accepts(spec({ name: 'ratio', kind: 'number', min: 0 }), [
    ['0.25', 0.25],
    [2.5, 2.5],
  ]);
});

test('lists: comma-separated text, YAML lists of scalars (items split too), blanks dropped; objects refused', () => {
  const l = spec({ name: 'l', kind: 'list' });
  accepts(l, [
    ['a, b,,c ', ['a', 'b', 'c']],
    ['', []],
    [
      ['x, y', 'z'],
      ['x', 'y', 'z'],
    ],
    [
      [1, 2],
      ['1', '2'],
    ],
    [5, ['5']],
  ]);
  refuses(l, [
    [{ a: 1 }, /^expected a list of text values/],
    [[{}], /^expected a list of text values/],
  ]);
});

test('text: scalars as written, choices enforced with the list of them; objects refused', () => {
  accepts(spec({ name: 's', kind: 'string' }), [
    [' kept as is ', ' kept as is '],
    [5, '5'],
    [false, 'false'],
  ]);
  refuses(spec({ name: 's', kind: 'string' }), [
    [null, /^expected a text value, got null$/],
    [['a'], /^expected a text value/],
  ]);
  const c = spec({ name: 'c', kind: 'string', choices: ['text', 'json'] });
  accepts(c, [['json', 'json']]);
  refuses(c, [
    ['xml', /^must be one of text, json; got "xml"$/],
    ['JSON', /must be one of/],
  ]);
});
