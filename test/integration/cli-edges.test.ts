// The first minutes of a new user: start-up failures are one line that says what to change, a container configured
// only through env serves with no command, and shutdown says what it does (a second Ctrl-C exits at once).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startCli, stopAll, type Started } from '../support/process.js';
import { call, chat, startRouter } from '../support/router.js';
import { startLocalSim, stopLocalSims } from '../support/sim-here.js';
import { eventually, until, within } from '../support/within.js';
import { scratchDir } from '../support/scratch.js';

const exited = (p: Started): Promise<number | null> =>
  p.child.exitCode !== null ? Promise.resolve(p.child.exitCode) : new Promise((resolve) => p.child.once('exit', (code) => resolve(code)));

/** What a failed start printed: one line, no stack frames. */
function oneLine(p: Started): string {
  const lines = p.output().trim().split('\n');
  assert.equal(lines.length, 1, `one line, got:\n${p.output()}`);
  assert.doesNotMatch(p.output(), /^\s+at /m, 'no stack frames');
  return lines[0] as string;
}

// independent processes, each test waiting on its own exits or output: two tests at a time (more starts at once only
// queue on a busy 2-core machine)
describe('start-up and shutdown as an operator meets them', { timeout: 60_000, concurrency: 2 }, () => {
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });

  test('a port in use: a non-zero exit and one line naming the port and --port', async () => {
    // the port is held by a listener in the test process: what holds it is not the subject, the second start is
    const first = net.createServer();
    await new Promise<void>((resolve, reject) => first.once('error', reject).listen(0, '127.0.0.1', resolve));
    const port = (first.address() as net.AddressInfo).port;
    try {
      // the router and the demo try the held port at once, each checked on its own
      const second = startCli(['serve', '--host', '127.0.0.1', '--port', String(port), '--known-models', 'm', '--log-level', 'warn']);
      const demo = startCli(['demo', '--port', String(port), '--log-level', 'warn']);
      assert.equal(await within(15_000, 'the second router to exit', exited(second)), 1);
      const line = oneLine(second);
      assert.match(line, new RegExp(`port ${port} is already in use`));
      assert.match(line, /--port/);
      // the demo names its own flag and env
      assert.equal(await within(20_000, 'the demo to exit', exited(demo)), 1);
      assert.match(oneLine(demo), new RegExp(`port ${port} is already in use.*demo --port, env LLM_ROUTER_DEMO_PORT`));
    } finally {
      await new Promise((resolve) => first.close(resolve));
    }
  });

  test('a container configured through LLM_ROUTER_* env only serves with no command at all', async () => {
    const sim = await startLocalSim(['--model', 'env-model']);
    const proc = startCli([], {
      LLM_ROUTER_STATIC_BACKENDS: sim.url,
      LLM_ROUTER_STATIC_MODELS: 'env-model',
      LLM_ROUTER_HOST: '127.0.0.1',
      LLM_ROUTER_PORT: '0',
      LLM_ROUTER_LOG_FORMAT: 'json',
      LLM_ROUTER_DRAIN_SECONDS: '0',
    });
    await proc.waitForOutput('llm-router listening');
    const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(proc.output())?.[1] as string;
    const answer = await eventually(
      'the env-configured router serves',
      () => call(`${url}/v1/chat/completions`, { body: chat('env-model') }),
      (r) => r.status === 200,
    );
    assert.equal(answer.status, 200);
    await proc.stop();
  });

  test('no command and nothing configured: exit 2 with one line saying what to give', async () => {
    const proc = startCli([], {});
    assert.equal(await within(15_000, 'exit', exited(proc)), 2);
    assert.match(proc.output(), /nothing to route to: give engines with --static-backends/);
  });

  test('Kubernetes discovery with no kubeconfig and no service account: exit 2 and one line saying so', async () => {
    const home = scratchDir('no-kube-');
    const env = { HOME: home, KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' };
    const proc = startCli(['serve', '--host', '127.0.0.1', '--port', '0', '--service-discovery', 'k8s'], env);
    assert.equal(await within(15_000, 'exit', exited(proc)), 2);
    assert.match(oneLine(proc), /--service-discovery k8s needs access to a Kubernetes API server.*no kubeconfig/);
  });

  test('typos on the command line, in env and in the YAML file: exit 2 with the closest name', async () => {
    const dir = scratchDir('typos-');
    const file = path.join(dir, 'router.yaml');
    writeFileSync(file, 'prot: 8001\nknown-models: [m]\n');
    const cases: { args: string[]; env?: Record<string, string>; says: RegExp }[] = [
      { args: ['serve', '--prot', '1', '--known-models', 'm'], says: /unknown flag --prot \(did you mean --port\?\)/ },
      {
        args: ['serve', '--known-models', 'm'],
        env: { LLM_ROUTER_PORTT: '1' },
        says: /LLM_ROUTER_PORTT matches no flag \(did you mean LLM_ROUTER_PORT\?\)/,
      },
      { args: ['serve', '--config', file], says: /unknown setting "prot" \(did you mean port\?\)/ },
      { args: ['sever', '--known-models', 'm'], says: /unknown command "sever" \(did you mean serve\?\)/ },
      { args: ['sim', '--modle', 'x'], says: /unknown flag --modle \(did you mean --model\?\)/ },
    ];
    // the five processes at once, each checked on its own
    await Promise.all(
      cases.map(async (c) => {
        const proc = startCli(c.args, c.env ?? {});
        assert.equal(await within(15_000, `exit of ${c.args.join(' ')}`, exited(proc)), 2, c.args.join(' '));
        assert.match(proc.output(), c.says);
        assert.doesNotMatch(proc.output(), /^\s+at /m, 'no stack frames');
      }),
    );
  });

  test('shutdown says when draining starts and ends; a second SIGINT exits at once', async () => {
    const sim = await startLocalSim(['--model', 's', '--ttft-ms', '5', '--itl-ms', '1000', '--output-tokens', '60']);
    const router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      's',
      '--drain-seconds',
      '0',
      '--shutdown-timeout',
      '60',
    ]);
    await until(
      'ready',
      async () => (await call(`${router.url}/v1/chat/completions`, { body: chat('s', { max_tokens: 1 }) })).status === 200,
    );
    // a stream that would run for a minute keeps the router from finishing its shutdown
    const stream = call(`${router.url}/v1/chat/completions`, { body: chat('s', { stream: true }), timeoutMs: 60_000 }).catch(
      (e: Error) => e,
    );
    await until('the stream in flight', async () => (await call(`${sim.url}/_sim/stats`)).json<{ running: number }>().running === 1);
    router.proc.child.kill('SIGINT');
    await router.proc.waitForOutput('draining: /ready answers 503');
    router.proc.child.kill('SIGINT');
    assert.equal(await within(5_000, 'exit after the second SIGINT', exited(router.proc)), 130);
    assert.match(router.proc.output(), /second SIGINT: exiting now/);
    await stream;
  });

  test('a normal shutdown logs its end', async () => {
    const router = await startRouter(['--known-models', 'm']);
    assert.equal(await router.stop('SIGTERM'), 0);
    assert.match(router.proc.output(), /"msg":"draining: \/ready answers 503[^"]*"[\s\S]*"msg":"drained and stopped"/);
  });
});
