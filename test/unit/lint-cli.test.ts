// `llm-router lint` as a user runs it: exit codes, text and JSON output, stdin, directories, bad input.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile, mkdir, copyFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI } from '../support/process.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'lint');

function lint(args: string[], stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'lint', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin ?? '');
  });
}

describe('llm-router lint (CLI)', { timeout: 60_000 }, () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'lint-cli-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('errors: exit 1, one block per finding with rule, object, container, why and fix', async () => {
    const r = await lint([path.join(FIXTURES, 'health-everywhere.yaml')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stdout,
      /health-everywhere\.yaml:39:23: error probe-on-health: Deployment\/vllm-llama3-deployment-vllm in default, container vllm\n {4}why: .+\n {4}fix: .+/,
    );
    assert.match(r.stdout, /warning no-startup-probe/);
    assert.match(r.stdout, /4 errors, 1 warning in 3 objects from 1 file\n$/);
  });

  test('only warnings: exit 0', async () => {
    const r = await lint([path.join(FIXTURES, 'model-name.yaml')]);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /0 errors, 2 warnings/);
  });

  test('--routing-logic and --kv-events-port stand for the router: they win over the one in the input', async () => {
    const file = path.join(FIXTURES, 'kvaware.yaml');
    const asInput = await lint([file]);
    assert.equal(asInput.code, 0);
    assert.match(asInput.stdout, /warning kvaware-no-kv-events: Pod\/llama-no-events in inference, container vllm/);
    const roundrobin = await lint(['--routing-logic', 'roundrobin', file]);
    assert.doesNotMatch(roundrobin.stdout, /kvaware-/);
    const port = await lint(['--kv-events-port', '6000', file]);
    assert.doesNotMatch(port.stdout, /Pod\/llama-other-port/);
    assert.match(port.stdout, /kvaware-no-kv-events: Pod\/llama-good in inference/);
  });

  test('--format json: findings and a summary', async () => {
    const r = await lint(['--format', 'json', path.join(FIXTURES, 'sidecar-port.yaml')]);
    assert.equal(r.code, 1);
    const out = JSON.parse(r.stdout) as { findings: Record<string, unknown>[]; summary: Record<string, number> };
    assert.deepEqual(out.summary, { errors: 2, warnings: 0, objects: 1, files: 1 });
    assert.deepEqual(Object.keys(out.findings[0] as object).sort(), [
      'column',
      'container',
      'file',
      'fix',
      'line',
      'object',
      'rule',
      'severity',
      'why',
    ]);
    assert.equal(out.findings[0]?.rule, 'probe-on-sidecar-port');
  });

  test('- reads stdin; --expected-load-seconds sets the load time of workloads without the annotation', async () => {
    const { readFile } = await import('node:fs/promises');
    const text = await readFile(path.join(FIXTURES, 'no-startup-probe.yaml'), 'utf8');
    const r = await lint(['-', '--expected-load-seconds', '30'], text);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /<stdin>:\d+:\d+: warning no-readiness-probe/);
    assert.doesNotMatch(r.stdout, /no-startup-probe/);
  });

  test('a directory is read recursively; a Helm chart inside it is skipped with a note', async () => {
    const sub = path.join(dir, 'tree', 'nested');
    await mkdir(path.join(dir, 'tree', 'chart', 'templates'), { recursive: true });
    await mkdir(sub, { recursive: true });
    await copyFile(path.join(FIXTURES, 'good.yaml'), path.join(dir, 'tree', 'good.yaml'));
    await copyFile(path.join(FIXTURES, 'port-mismatch.yaml'), path.join(sub, 'port.yml'));
    await writeFile(path.join(dir, 'tree', 'chart', 'Chart.yaml'), 'name: x\nversion: 0.1.0\n');
    await copyFile(path.join(FIXTURES, 'unrendered', 'deployment.yaml'), path.join(dir, 'tree', 'chart', 'templates', 'deployment.yaml'));
    const r = await lint([path.join(dir, 'tree')]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /port\.yml:\d+:\d+: error probe-port-mismatch/);
    assert.match(r.stdout, /2 errors, 0 warnings in 7 objects from 2 files/);
    assert.match(r.stderr, /skipped Helm chart .*chart: lint what it renders/);
  });

  test('bad YAML: exit 2 and a clear message naming file, line and column', async () => {
    const r = await lint([path.join(FIXTURES, 'bad-yaml.yaml')]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^llm-router lint: .*bad-yaml\.yaml:6:1: not valid YAML: /);
  });

  test('usage errors exit 2: no input, missing file, bad --format; --list-rules lists every rule', async () => {
    assert.equal((await lint([])).code, 2);
    const missing = await lint([path.join(dir, 'nope.yaml')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /nope\.yaml: no such file or directory/);
    assert.equal((await lint(['--format', 'xml', path.join(FIXTURES, 'good.yaml')])).code, 2);
    const rules = await lint(['--list-rules']);
    assert.equal(rules.code, 0);
    for (const id of [
      'probe-on-health',
      'probe-on-sidecar-port',
      'startup-budget-too-short',
      'probe-port-mismatch',
      'no-startup-probe',
      'missing-served-model-name',
      'selector-mismatch',
      'lora-runtime-loading-off',
      'lora-not-enabled',
      'lora-annotation-invalid',
    ]) {
      assert.match(rules.stdout, new RegExp(`^${id} `, 'm'));
    }
  });
});
