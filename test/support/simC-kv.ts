// kvaware routers over in-process simulators (test/support/sim-here.ts): the KV-cache event endpoints come from the
// SimEngine's own status (engine.kvEvents(), the same values `llm-router sim` prints in its "sim kv-events on" line),
// so a simulator publishing KV-cache events needs no process of its own.
import { kvawareRoutingArgs } from './router.js';
import type { SimHere } from './sim-here.js';

/** The KV-cache event endpoints an in-process simulator started with --kv-events-port and --kv-events-replay-port bound. */
export function simHereKvEndpoints(sim: SimHere): { readonly events: string; readonly replay: string } {
  const kv = sim.engine.kvEvents();
  if (!kv?.replayEndpoint) throw new Error(`the simulator at ${sim.url} publishes no KV-cache events with a replay socket`);
  return { events: kv.endpoint, replay: kv.replayEndpoint };
}

/** `serve` flags routing `model` by kvaware over these in-process simulators, their events followed (as kvawareArgs). */
export function kvawareArgsHere(sims: readonly SimHere[], model: string): string[] {
  return kvawareRoutingArgs(
    sims.map((s) => ({ url: s.url, ...simHereKvEndpoints(s) })),
    model,
  );
}
