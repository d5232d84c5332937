// Simulated engines inside the test process, for integration tests whose subject is the router: the same simulator
// (src/tools/sim, the code `llm-router sim` runs) from the same flags, on 127.0.0.1, answering over HTTP as before, but
// without a process start of its own (a `node dist/cli/main.js sim` costs ~0.7 s of CPU before it listens). The
// router stays a real process. A test file that starts these closes them in an `after` hook with stopSimsHere():
// an open listener would keep the test process alive.
import { parseFlags } from '../../src/router/config/flags.js';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import { SIM_FLAGS, simOptionsFromFlags } from '../../src/tools/sim/flags.js';

export interface SimHere {
  readonly url: string;
  readonly port: number;
  readonly engine: SimEngine;
  stop(): Promise<void>;
}

const open = new Set<SimEngine>();

/**
 * A simulator started from `llm-router sim` flags (as startSim takes them) on 127.0.0.1; on port 0 unless `port` is
 * given (a port from freePort()). Resolves once it listens.
 */
export async function startSimHere(args: readonly string[], opts: { port?: number } = {}): Promise<SimHere> {
  const flags = parseFlags(['--host', '127.0.0.1', '--port', String(opts.port ?? 0), ...args], SIM_FLAGS, {
    env: {},
    envPrefix: 'LLM_ROUTER_SIM_',
  }).values;
  const engine = await startSimEngine(simOptionsFromFlags(flags));
  open.add(engine);
  return {
    url: engine.url,
    port: engine.port,
    engine,
    stop: async () => {
      open.delete(engine);
      await engine.close();
    },
  };
}

/** Closes every simulator startSimHere() started that is still open. */
export async function stopSimsHere(): Promise<void> {
  const engines = [...open];
  open.clear();
  await Promise.all(engines.map((e) => e.close()));
}

/** startSimHere with the port as a plain argument (a port from freePort(), for a caller that needs it before it listens). */
export const startLocalSim = (args: readonly string[], port = 0): Promise<SimHere> => startSimHere(args, { port });
export const stopLocalSims = stopSimsHere;
export type LocalSim = SimHere;
