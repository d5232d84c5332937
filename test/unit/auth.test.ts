// The API-key gate: keys from flags and from --api-keys-file in either form, the entry of the key a request presents,
// and the file re-read when it changes (a file gone or not valid keeps the keys read last).
import { capturedLog } from '../support/captured-log.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { keyTenant } from '../../src/router/config/api-keys-file.js';
import { PRIORITY_MAX } from '../../src/router/core/flow.js';
import { StartupError } from '../../src/router/core/startup-error.js';
import { ApiKeys } from '../../src/router/server/auth.js';

const capture = capturedLog;

/** writes the file anew (another inode), as a Secret update does, so the change is seen whatever the clock */
function replace(file: string, text: string): void {
  writeFileSync(`${file}.new`, text);
  renameSync(`${file}.new`, file);
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'auth-keys-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('no keys: nothing refused, no entry', () => {
  const keys = new ApiKeys([], undefined, capture().log);
  assert.equal(keys.enabled, false);
  assert.equal(keys.refuses({}), false);
  assert.equal(keys.entryOf(bearer('any')), undefined);
  assert.deepEqual([...keys.tenants], []);
});

test('plain keys file and --api-key: each key its own tenant, priority 0, no cap; presented any of three ways', () =>
  withDir((dir) => {
    const file = path.join(dir, 'keys');
    writeFileSync(file, '# clients\nk-file\n');
    const keys = new ApiKeys(['k-flag'], file, capture().log);
    try {
      assert.equal(keys.enabled, true);
      for (const key of ['k-flag', 'k-file']) {
        const want = { tenant: keyTenant(key), priority: 0, maxPriority: PRIORITY_MAX, trusted: false };
        for (const headers of [
          bearer(key),
          { 'x-api-key': key },
          { authorization: `Basic ${Buffer.from(`u:${key}`).toString('base64')}` },
        ]) {
          const e = keys.entryOf(headers);
          assert.deepEqual(e && { tenant: e.tenant, priority: e.priority, maxPriority: e.maxPriority, trusted: e.trusted }, want);
          assert.equal(keys.refuses(headers), false);
        }
      }
      for (const headers of [{}, bearer('k-nope'), bearer('k-fil'), bearer('k-file2'), { authorization: 'k-file' }]) {
        assert.equal(keys.entryOf(headers), undefined);
        assert.equal(keys.refuses(headers), true);
      }
      assert.deepEqual([...keys.tenants].sort(), [keyTenant('k-flag'), keyTenant('k-file')].sort());
    } finally {
      keys.stop();
    }
  }));

test('YAML keys file: the entry of the presented key; a key also given by --api-key has the file’s entry', () =>
  withDir((dir) => {
    const file = path.join(dir, 'keys.yaml');
    writeFileSync(file, '- key: k-acme\n  tenant: acme\n  priority: 5\n  max_priority: 9\n- key: k-gw\n  tenant: gw\n  trusted: true\n');
    const keys = new ApiKeys(['k-acme', 'k-flag'], file, capture().log);
    try {
      const acme = keys.entryOf(bearer('k-acme'));
      assert.deepEqual(acme && [acme.tenant, acme.priority, acme.maxPriority, acme.trusted], ['acme', 5, 9, false]);
      assert.deepEqual(acme?.flow, { tenant: 'acme', priority: 5 });
      const gw = keys.entryOf({ 'x-api-key': 'k-gw' });
      assert.deepEqual(gw && [gw.tenant, gw.priority, gw.maxPriority, gw.trusted], ['gw', 0, PRIORITY_MAX, true]);
      assert.equal(keys.entryOf(bearer('k-flag'))?.tenant, keyTenant('k-flag'));
      assert.equal(keys.entryOf(bearer('k-other')), undefined);
      assert.deepEqual([...keys.tenants].sort(), ['acme', 'gw', keyTenant('k-flag')].sort());
    } finally {
      keys.stop();
    }
  }));

test('a keys file that is not valid at start is refused, naming the file and the entry, never a key', () =>
  withDir((dir) => {
    const file = path.join(dir, 'keys');
    writeFileSync(file, '- key: k-ok\n- key: k-secret-1\n  priority: urgent\n');
    assert.throws(
      () => new ApiKeys([], file, capture().log),
      (err: Error) => {
        assert.equal(err.message, `--api-keys-file ${file}: entry 2 at line 2: priority must be an integer from -1000 to 1000`);
        assert.ok(err instanceof StartupError && err.exitCode === 2, 'one line and exit 2, as for a bad flag');
        return true;
      },
    );
    assert.throws(
      () => new ApiKeys([], path.join(dir, 'missing'), capture().log),
      (err: Error) => err instanceof StartupError && err.exitCode === 1 && /--api-keys-file .*missing: ENOENT/.test(err.message),
    );
  }));

test('re-read when it changes: plain to YAML and back; not valid or gone keeps the keys read last, with one WARN', () =>
  withDir((dir) => {
    const file = path.join(dir, 'keys');
    writeFileSync(file, 'k-one\n');
    const { log, lines } = capture();
    const keys = new ApiKeys([], file, log, 3_600_000);
    try {
      assert.equal(keys.entryOf(bearer('k-one'))?.tenant, keyTenant('k-one'));

      replace(file, '- key: k-two\n  tenant: two\n  priority: -2\n');
      keys.recheck();
      assert.equal(keys.refuses(bearer('k-one')), true, 'a key taken out is refused');
      assert.equal(keys.entryOf(bearer('k-two'))?.priority, -2);
      assert.deepEqual([...keys.tenants], ['two']);

      const warnings = (): string[] => lines.filter((l) => JSON.parse(l).level === 'warn' || JSON.parse(l).level === 40);
      replace(file, '- key: k-three-secret\n  tenant: three\n  trusted: maybe\n');
      keys.recheck();
      keys.recheck();
      assert.equal(keys.entryOf(bearer('k-two'))?.tenant, 'two', 'the keys read last stay');
      assert.equal(keys.refuses(bearer('k-three-secret')), true);
      assert.equal(warnings().length, 1, 'one WARN per change');
      assert.match(warnings()[0] as string, /API keys file is not valid; keeping the keys read last/);
      assert.match(warnings()[0] as string, /entry 1 at line 1 \(tenant \\"three\\"\): trusted must be true or false/);
      assert.ok(!lines.join('').includes('k-three-secret'), 'no key in the log');

      rmSync(file);
      keys.recheck();
      assert.equal(keys.entryOf(bearer('k-two'))?.tenant, 'two');
      assert.equal(warnings().length, 2);

      replace(file, '# back to lines\nk-four\n');
      keys.recheck();
      assert.equal(keys.entryOf(bearer('k-four'))?.tenant, keyTenant('k-four'));
      assert.equal(keys.refuses(bearer('k-two')), true);
    } finally {
      keys.stop();
    }
  }));
