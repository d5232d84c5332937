// The skip helper of the suites that need Go, Prometheus/promtool, Chromium, kubectl, buildah or debootstrap: with PATH
// reduced to node's own directory each is skipped with one line naming the tool and its install command; with
// TEST_TOOLS=required (CI) the same missing tool fails the run.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { INSTALL, installAllCommand, type Tool } from '../support/tools.js';
import { loadRouterConfig } from '../../src/router/config/config.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'tools', 'needs-tools.ts');
const TOOLS: Tool[] = ['go', 'prometheus', 'promtool', 'chromium', 'kubectl', 'buildah', 'debootstrap'];
/** a PATH with only node on it (a directory of one symbolic link): none of the tools */
const NODE_ONLY = mkdtempSync(path.join(os.tmpdir(), 'node-only-'));
symlinkSync(process.execPath, path.join(NODE_ONLY, 'node'));
after(() => rmSync(NODE_ONLY, { recursive: true, force: true }));

function runFixture(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', FIXTURE], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('requireTool: a missing tool skips, or fails under CI', { timeout: 130_000 }, () => {
  test('PATH with node only: every tool suite is skipped with one line naming the tool and its install command', async () => {
    const r = await runFixture({ PATH: NODE_ONLY, HOME: process.env.HOME });
    assert.equal(r.code, 0, r.output);
    for (const tool of TOOLS) {
      const lines = r.output.split('\n').filter((l) => l.includes(`# SKIP ${tool} is not installed`));
      assert.equal(lines.length, 1, `one skip line for ${tool}:\n${r.output}`);
      assert.ok(lines[0]?.includes(`(install: ${INSTALL[tool]})`), lines[0]);
    }
    assert.doesNotMatch(r.output, /ok \d+ - runs/, 'no suite ran');
  });

  test('the same PATH with TEST_TOOLS=required: the run fails, naming the missing tool', async () => {
    const r = await runFixture({ PATH: NODE_ONLY, HOME: process.env.HOME, TEST_TOOLS: 'required' });
    assert.notEqual(r.code, 0, r.output);
    assert.match(r.output, /TEST_TOOLS=required: go is not installed \(install: apt-get install -y golang-go/);
  });

  test("CI's variables reach every router a suite starts and are not refused as a mistyped LLM_ROUTER_* flag", () => {
    // .ci/run exports these; the routers the suites spawn inherit them (a variable named LLM_ROUTER_* failed 90 tests)
    const ciEnv = { CI: 'true', TEST_TOOLS: 'required' };
    assert.doesNotThrow(() => loadRouterConfig(['--static-backends', 'http://127.0.0.1:1', '--static-models', 'm'], ciEnv));
  });

  test('npm run test:tools gives one command that installs them all', () => {
    const all = installAllCommand();
    for (const pkg of [
      'golang-go',
      'golang-github-masterminds-sprig-dev',
      'golang-gopkg-yaml.v2-dev',
      'prometheus',
      'chromium',
      'kubernetes-client',
      'buildah',
      'debootstrap',
    ])
      assert.ok(all.includes(` ${pkg}`), pkg);
  });
});
