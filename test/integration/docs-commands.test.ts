// Every shell command the README and docs/ give is accounted for: the ones that need no cluster, no helm and no
// long benchmark are run as written (through a `llm-router` on the PATH that is this build) and must exit as the docs
// say; the others are listed here with the reason they are not run. A new command in the docs fails this test until
// it is classified, so the docs cannot drift from what works.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { CLI } from '../support/process.js';
import { within } from '../support/within.js';
import { requireTool } from '../support/tools.js';
import { scratchDir } from '../support/scratch.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

interface DocCommand {
  readonly where: string;
  readonly text: string;
}

/** The commands of every ```sh block: continuation lines joined, trailing comments dropped. */
function documentedCommands(): DocCommand[] {
  const files = [
    'README.md',
    ...readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const out: DocCommand[] = [];
  for (const file of files) {
    for (const m of readFileSync(path.join(ROOT, file), 'utf8').matchAll(/```(?:sh|bash|shell)\n([\s\S]*?)```/g)) {
      const joined = (m[1] as string).replace(/\\\n\s*/g, ' ');
      for (const line of joined.split('\n')) {
        const text = line.replace(/\s+#\s.*$/, '').trim();
        if (text) out.push({ where: file, text });
      }
    }
  }
  return out;
}

type Check =
  | { readonly kind: 'exits'; readonly code: number; readonly output?: RegExp }
  /** a server: it must say it listens; it is run with a port of its own choosing and then stopped */
  | { readonly kind: 'serves'; readonly listening: string; readonly env?: 'kube' }
  | { readonly kind: 'not-run'; readonly why: string };

/** Placeholders in the docs and what the test uses for them. */
const SUBSTITUTES: readonly [RegExp, string][] = [
  [/ -f my-values\.yaml/, ' -f test/fixtures/chart/three-models.yaml'],
  [/ > llm-router\.yaml/, ' > /dev/null'],
  [/--port 8090/, '--port 0'],
  [/ \[--warmup\]/, ''],
];

const RULES: readonly [RegExp, Check][] = [
  [/^npm ci( &&|$)/, { kind: 'not-run', why: 'reinstalls node_modules: .ci/run does it before the tests' }],
  [/^npm test$/, { kind: 'not-run', why: 'this is the test suite itself' }],
  [
    /^(apt-get update|apt-get install|curl -fsSLo \/usr\/local\/bin\/kubectl) /,
    { kind: 'not-run', why: 'installs the test tools as root: .ci/run does it' },
  ],
  [/^npm start$/, { kind: 'not-run', why: 'the demo: test/integration/demo.test.ts runs it' }],
  [
    /^npm run image -- --output /,
    { kind: 'not-run', why: 'builds the image as root with buildah and debootstrap: test/integration/image.test.ts runs it' },
  ],
  [/^skopeo copy oci-archive:/, { kind: 'not-run', why: 'pushes the image to a registry, which these machines do not reach' }],
  [/^npm run bench/, { kind: 'not-run', why: 'the benchmark takes minutes; it is never part of npm test' }],
  [/^npm run build$/, { kind: 'exits', code: 0 }],
  [
    /^(node --import tsx bench\/|node --cpu-prof|wrk |kill )/,
    { kind: 'not-run', why: 'the profiling recipe: a manual, minutes-long session' },
  ],
  [
    /^docker run --rm -p 4317:4317 -p 16686:16686 jaegertracing\/all-in-one/,
    { kind: 'not-run', why: 'a collector to try tracing with: needs docker; test/integration/otel.test.ts plays the collector' },
  ],
  [
    /^llm-router demo --otel-endpoint /,
    { kind: 'not-run', why: 'the demo listens on 127.0.0.1:8001: demo.test.ts runs it, otel.test.ts its --otel-* pass-through' },
  ],
  [/^curl -s localhost:8001\/v1\/chat\/completions /, { kind: 'not-run', why: 'asks the demo above, with a collector running' }],
  [/^helm /, { kind: 'not-run', why: 'helm is not installable here; the chart is rendered by tools/chart-render in the tests' }],
  [/^kubectl apply/, { kind: 'not-run', why: 'needs a cluster' }],
  [/^vllm serve /, { kind: 'not-run', why: 'an engine command: vLLM needs a GPU; the simulator plays it in the tests' }],
  [/^npm run --silent chart:render -- -f/, { kind: 'exits', code: 0 }],
  [/^npm run --silent chart:render \| llm-router lint -$/, { kind: 'exits', code: 0 }],
  [/^npx llm-router serve --service-discovery k8s/, { kind: 'serves', listening: 'llm-router listening', env: 'kube' }],
  [/^npx llm-router serve /, { kind: 'serves', listening: 'llm-router listening' }],
  [/^llm-router probe /, { kind: 'serves', listening: 'llm-router probe listening' }],
  [/^llm-router lint --list-rules$/, { kind: 'exits', code: 0, output: /probe-on-health/ }],
  [/^llm-router lint --format json/, { kind: 'exits', code: 0, output: /"findings": \[\]/ }],
  [/^llm-router lint /, { kind: 'exits', code: 0 }],
];

function runShell(command: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', command], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      // a grandchild may still hold the pipes (npm's children); this side is done with them
      child.stdout.destroy();
      child.stderr.destroy();
      resolve({ code, output });
    });
  });
}

/** Starts a server command, waits for its listening line, stops it; resolves with what it printed. */
function runServer(command: string, env: NodeJS.ProcessEnv, listening: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // exec: the signal reaches the server itself, not a shell around it
    const child = spawn('sh', ['-c', `exec ${command}`], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command}: no "${listening}" within 20 s:\n${output}`));
    }, 20_000);
    const onData = (c: Buffer): void => {
      output += c.toString('utf8');
      if (output.includes(listening)) child.kill('SIGTERM');
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', () => {
      clearTimeout(timer);
      child.stdout.destroy();
      child.stderr.destroy();
      if (output.includes(listening)) resolve(output);
      else reject(new Error(`${command} exited before "${listening}":\n${output}`));
    });
  });
}

describe('the commands in README.md and docs/', { timeout: 120_000 }, () => {
  let bin: string;
  let kube: FakeKube;
  before(async () => {
    // `llm-router` on the PATH is this build, as it is in the container image
    bin = scratchDir('llm-router-bin-');
    const shim = path.join(bin, 'llm-router');
    writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
    chmodSync(shim, 0o755);
    kube = await startFakeKube();
  });
  after(() => kube.close());

  test('every command is classified, and every runnable one does what the docs say', async (t) => {
    const commands = documentedCommands();
    assert.ok(commands.length >= 15, `found the documented commands (${commands.length})`);
    let ran = 0;
    const skipped: string[] = [];
    let chartSkipped = 0;
    for (const c of commands) {
      const rule = RULES.find(([re]) => re.test(c.text));
      assert.ok(rule, `${c.where}: no rule for "${c.text}": add it to RULES (run it, or say why not)`);
      const check = rule[1];
      // the chart renderer is a Go program: without Go these commands are skipped with the install line
      const noGo = c.text.includes('chart:render') ? requireTool('go') : false;
      if (noGo) {
        skipped.push(`${c.text} (${noGo})`);
        chartSkipped++;
        continue;
      }
      if (check.kind === 'not-run') {
        skipped.push(`${c.text} (${check.why})`);
        continue;
      }
      // `npx llm-router` is the shim on the PATH here (the last test runs npx itself): npm would put a process of its
      // own between the signal and the router
      let text = c.text.replace(/^npx llm-router /, 'llm-router ');
      for (const [re, to] of SUBSTITUTES) text = text.replace(re, to);
      const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` };
      if (check.kind === 'serves') {
        // a port of its own choosing: the documented default (8001) may be taken on a test machine
        const serve = text.includes(' serve ') ? `${text} --host 127.0.0.1 --port 0 --drain-seconds 0` : text;
        if (check.env === 'kube') env.KUBECONFIG = kube.kubeconfigPath;
        await within(30_000, serve, runServer(serve, env, check.listening));
      } else {
        const r = await runShell(text, env, 60_000);
        assert.equal(r.code, check.code, `${c.where}: "${c.text}" exited ${r.code}:\n${r.output.slice(-2000)}`);
        if (check.output) assert.match(r.output, check.output, `${c.where}: "${c.text}" output`);
      }
      ran++;
    }
    t.diagnostic(`${ran} documented commands run, ${skipped.length} not run: ${skipped.join('; ')}`);
    if (chartSkipped > 0) t.diagnostic(`SKIP ${chartSkipped} chart:render commands: ${requireTool('go')}`);
    assert.ok(ran + chartSkipped >= 8, `most documented commands run (${ran})`);
  });

  test('npx llm-router is the CLI of this checkout', async () => {
    // tsc writes files 0644; on a fresh checkout npx finds the bin but cannot run it unless the build marks it
    const bin = path.join(ROOT, 'dist', 'cli', 'main.js');
    assert.ok((statSync(bin).mode & 0o111) !== 0, 'npm run build leaves dist/cli/main.js executable');
    const r = await runShell('npx --no-install llm-router --version', process.env, 60_000);
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, /^llm-router \d+\.\d+\.\d+/m);
  });
});
