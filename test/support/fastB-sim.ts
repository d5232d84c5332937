// A simulated engine inside the test process: the same flags as `llm-router sim`, without a process start (about half
// a second of CPU each). For engines that are only the router's counterpart; a test that kills its engine (SIGKILL)
// starts it as a process with startSim.
import { parseFlags } from '../../src/router/config/flags.js';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import { SIM_FLAGS, simOptionsFromFlags } from '../../src/tools/sim/flags.js';

export interface LocalSim {
  readonly url: string;
  readonly port: number;
  readonly engine: SimEngine;
  stop(): Promise<void>;
}

const open = new Set<LocalSim>();

/**
 * An engine in this process, from `llm-router sim` flags; resolves once it listens (after any --startup-refuse-seconds,
 * so a caller that needs the handle before passes `port` from freePort() and does not await at once).
 */
export async function startLocalSim(args: readonly string[], port = 0): Promise<LocalSim> {
  const flags = parseFlags(['--host', '127.0.0.1', '--port', String(port), ...args], SIM_FLAGS, { env: {} }).values;
  const engine = await startSimEngine(simOptionsFromFlags(flags));
  const sim: LocalSim = {
    url: engine.url,
    port: engine.port,
    engine,
    stop: async () => {
      open.delete(sim);
      await engine.close();
    },
  };
  open.add(sim);
  return sim;
}

/** Closes every engine startLocalSim started that is still open (for an `after` hook). */
export async function stopLocalSims(): Promise<void> {
  await Promise.all([...open].map((s) => s.stop()));
}
