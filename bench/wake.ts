// Wake latency: a request held for a model with no engine, then the engine starts and loads. How long after the
// engine's model is loaded does the held client get its first byte? That is the delay the router itself adds to every
// cold start (probing, releasing the hold, forwarding). Measured over many cold starts of a simulated engine.
import path from 'node:path';
import { fetchOnce, freePort, postTimed, startProc, waitUntil, type Proc } from './procs.js';

export interface WakeResult {
  readonly starts: number;
  /** engine model loaded -> held client's first byte, ms */
  readonly ms: readonly number[];
  readonly p50: number;
  readonly max: number;
  readonly probeWakeIntervalMs: number;
}

const MODEL = 'wake-model';
const BODY = JSON.stringify({ model: MODEL, stream: true, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });

export async function runWake(
  opts: { cli: string; dir: string; starts: number; loadingSeconds: number; probeWakeIntervalSeconds: number },
  log: (line: string) => void,
): Promise<WakeResult> {
  const enginePort = await freePort();
  const routerPort = await freePort();
  const router = startProc(
    'router-wake',
    process.execPath,
    [
      opts.cli,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(routerPort),
      '--log-level',
      'warn',
      '--static-backends',
      `http://127.0.0.1:${enginePort}`,
      '--static-models',
      MODEL,
      '--cold-start-wait',
      '120',
      '--probe-wake-interval',
      String(opts.probeWakeIntervalSeconds),
      '--probe-ready-interval',
      '0.5',
    ],
    path.join(opts.dir, 'router-wake.log'),
  );
  const ms: number[] = [];
  try {
    await waitUntil('router', async () => (await fetchOnce(routerPort, 'GET', '/ready')).status === 200, { proc: router });
    for (let i = 0; i < opts.starts; i++) {
      // the engine is down: the router must not think the model ready when the request arrives
      await waitUntil(
        'engine seen down',
        async () => !(await fetchOnce(routerPort, 'GET', '/v1/models')).text.includes('"status":"ready"'),
        { proc: router },
      );
      const answer = postTimed(routerPort, BODY);
      await waitUntil('request held', async () => /"held":1/.test((await fetchOnce(routerPort, 'GET', '/demand')).text), { proc: router });
      let engine: Proc | undefined;
      try {
        engine = startProc(
          'sim-wake',
          process.execPath,
          [
            opts.cli,
            'sim',
            '--host',
            '127.0.0.1',
            '--port',
            String(enginePort),
            '--model',
            MODEL,
            '--startup-loading-seconds',
            String(opts.loadingSeconds),
            '--ttft-ms',
            '0',
            '--itl-ms',
            '0',
          ],
          path.join(opts.dir, 'sim-wake.log'),
        );
        const { headAt: at, status } = await answer;
        if (status !== 200) throw new Error(`wake ${i + 1}: the held request answered ${status}`);
        const loadedAt = (JSON.parse((await fetchOnce(enginePort, 'GET', '/_sim/fault')).text) as { loadedAt: number }).loadedAt;
        ms.push(at - loadedAt);
        log(`wake ${i + 1}/${opts.starts}: first byte ${at - loadedAt} ms after the engine's model loaded`);
      } finally {
        await engine?.stop();
      }
    }
  } finally {
    await router.stop();
  }
  const sorted = [...ms].sort((a, b) => a - b);
  return {
    starts: ms.length,
    ms,
    p50: sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN,
    max: sorted.at(-1) ?? NaN,
    probeWakeIntervalMs: opts.probeWakeIntervalSeconds * 1000,
  };
}
