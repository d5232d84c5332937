// The demo answers each curl line it prints exactly as it says, and Ctrl-C stops everything it started.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { startCli, stopAll } from '../support/process.js';
import { eventually } from '../support/within.js';

const exec = promisify(execFile);

after(stopAll);

/** The process ids of a process's children (Linux: /proc/<pid>/task/<tid>/children). */
function childrenOf(pid: number): number[] {
  const tasks = readdirSync(`/proc/${pid}/task`);
  return tasks.flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('llm-router demo: every printed curl case answers as printed; SIGINT stops router and engines', { timeout: 60_000 }, async () => {
  const demo = startCli(['demo', '--port', '0', '--log-level', 'info', '--idle-seconds', '2']);
  await demo.waitForOutput('Press Ctrl-C', 30_000);
  const port = Number(/llm-router demo is up at http:\/\/127\.0\.0\.1:(\d+)/.exec(demo.output())?.[1]);
  const lines = demo
    .output()
    .split('\n')
    .map((l) => l.trim());
  const cases: { title: string; expect: number; command: string }[] = [];
  lines.forEach((line, i) => {
    const m = /^# (.*) \(expect (\d{3})\)$/.exec(line);
    if (m) cases.push({ title: m[1] as string, expect: Number(m[2]), command: lines[i + 1] as string });
  });
  assert.ok(cases.length >= 6, `the demo printed its cases:\n${demo.output()}`);
  // the banner names the operator's page at its real URL, and it is there
  assert.match(demo.output(), new RegExp(`the operator's page: http://127\\.0\\.0\\.1:${port}/dashboard `));
  assert.equal((await fetch(`http://127.0.0.1:${port}/dashboard`)).status, 200);
  // the start-up line lists every demo model, demo-wakeup included
  const startup = /models=\[([^\]]*)\]/.exec(demo.output())?.[1] ?? '';
  for (const m of ['demo-chat', 'gpt-4o-mini', 'demo-embed', 'demo-sleeper', 'demo-wakeup', 'demo-pd', 'demo-chat-sql'])
    assert.ok(startup.includes(m), `${m} in the start-up line: models=[${startup}]`);
  assert.ok(cases.every((c) => c.command.startsWith(`curl -s`) && c.command.includes(`127.0.0.1:${port}`)));
  const seen = new Set<number>();
  for (const c of cases) {
    // the wake-up case waits for an engine process to start and load (~4 s here, longer on a busy machine)
    const { stdout } = await exec('sh', ['-c', `${c.command} --max-time 25`], { timeout: 30_000 });
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(stdout)?.[1]);
    assert.equal(status, c.expect, `${c.title}\n${c.command}\n${stdout}`);
    seen.add(status);
    if (c.expect === 503) assert.match(stdout, /x-llm-router-model-state: scaled-to-zero/i);
    if (c.expect === 503) assert.match(stdout, /retry-after: \d+/i);
    if (c.expect === 404) assert.match(stdout, /"code":"model_not_found"/);
    if (c.expect === 404) assert.match(stdout, /Did you mean \\"demo-chat\\"\?/);
    if (c.title.startsWith('streaming')) assert.match(stdout, /data: \[DONE\]/);
  }
  assert.deepEqual([...seen].sort(), [200, 404, 503]);
  // the simulated autoscaler woke demo-wakeup for its case; after 2 s without requests it goes back to zero
  const wakeup = async (): Promise<string | undefined> =>
    ((await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: { id: string; status: string }[] }).data.find(
      (m) => m.id === 'demo-wakeup',
    )?.status;
  await eventually('demo-wakeup back at zero', wakeup, (status) => status === 'scaled-to-zero', 15_000, 200);
  const engines = (await (await fetch(`http://127.0.0.1:${port}/engines`)).json()) as {
    endpoints: { url: string; lastError?: string | null }[];
  };
  // the demo starts the router once its engines listen: no start-up race left as an endpoint's last error
  for (const e of engines.endpoints) assert.doesNotMatch(String(e.lastError ?? ''), /ECONNREFUSED/, e.url);
  const enginePids = childrenOf(demo.child.pid as number);
  assert.ok(enginePids.length >= 3, `the demo runs its engines as child processes: ${enginePids.join(', ')}`);
  const code = await demo.stop('SIGINT');
  assert.equal(code, 0);
  // the demo exits only after every engine it started has exited: at its exit, none of them is still running
  for (const pid of enginePids) assert.equal(running(pid), false, `engine process ${pid} had exited before the demo did`);
  for (const e of engines.endpoints) {
    await assert.rejects(fetch(`${e.url}/health`, { signal: AbortSignal.timeout(2_000) }), `engine ${e.url} was stopped`);
  }
});
