// The cost of one routing decision: ModelCatalog.resolve + policy.pick, with 1,000 ready endpoints across 100 models.
// Every policy in ROUTING_LOGICS is measured by name, so a new policy is benchmarked as soon as it exists.
import { ModelCatalog } from '../src/router/catalog/catalog.js';
import type { EndpointSpec } from '../src/router/core/endpoint.js';
import { ROUTING_LOGICS } from '../src/router/config/router-flags.js';
import { createPolicy } from '../src/router/routing/index.js';
import type { RouteRequest } from '../src/router/routing/policy.js';

export interface RoutingResult {
  readonly policy: string;
  readonly endpoints: number;
  readonly models: number;
  readonly nsPerOp: number;
}

/** A catalog with `endpoints` ready endpoints spread evenly over `models` models. */
export function benchCatalog(endpoints: number, models: number): { catalog: ModelCatalog; names: string[] } {
  const catalog = new ModelCatalog();
  const names = Array.from({ length: models }, (_, i) => `model-${i}`);
  const specs: EndpointSpec[] = Array.from({ length: endpoints }, (_, i) => ({
    id: `http://10.0.${Math.floor(i / 250)}.${i % 250}:8000`,
    url: `http://10.0.${Math.floor(i / 250)}.${i % 250}:8000`,
    models: [names[i % models] as string],
  }));
  catalog.setDeclarations('static', names);
  catalog.setEndpoints('static', specs);
  for (const e of catalog.endpoints()) catalog.setState(e, 'ready');
  return { catalog, names };
}

/** Requests as the handler builds them: the model, the client's headers and the parsed body (for prompt-aware policies). */
function benchRequests(names: readonly string[]): RouteRequest[] {
  return names.map((model, i) => ({
    model,
    headers: { 'content-type': 'application/json', 'user-agent': 'bench', 'x-user-id': `user-${i % 37}` },
    body: {
      model,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: `Question number ${i}: what is a fox?` },
      ],
      max_tokens: 16,
    },
  }));
}

/** Median ns/op over `rounds` timed rounds of `ops` decisions each (after a warm-up round). */
export function measureRouting(
  opts: { endpoints?: number; models?: number; ops?: number; rounds?: number; maxMs?: number } = {},
): RoutingResult[] {
  const endpoints = opts.endpoints ?? 1_000;
  const models = opts.models ?? 100;
  const ops = opts.ops ?? 1_000_000;
  const rounds = opts.rounds ?? 5;
  const { catalog, names } = benchCatalog(endpoints, models);
  const requests = benchRequests(names);
  const results: RoutingResult[] = [];
  for (const name of ROUTING_LOGICS) {
    const policy = createPolicy(name);
    const timings: number[] = [];
    const deadline = performance.now() + (opts.maxMs ?? 10_000);
    let sink = 0;
    for (let r = 0; r <= rounds && performance.now() < deadline; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < ops; i++) {
        const request = requests[i % models] as RouteRequest;
        const resolution = catalog.resolve(request.model);
        if (resolution.kind !== 'routable') throw new Error(`${request.model} is not routable`);
        const picked = policy.pick(resolution.candidates, request);
        if (picked === undefined) throw new Error(`${name} picked nothing`);
        sink += picked.inFlight;
      }
      const ns = Number(process.hrtime.bigint() - t0) / ops;
      if (r > 0) timings.push(ns); // round 0 warms the JIT up
      if (sink < 0) throw new Error('unreachable');
    }
    timings.sort((a, b) => a - b);
    results.push({ policy: name, endpoints, models, nsPerOp: timings[Math.floor(timings.length / 2)] ?? NaN });
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const r of measureRouting())
    process.stdout.write(`${r.policy}: ${r.nsPerOp.toFixed(1)} ns/op (${r.endpoints} endpoints, ${r.models} models)\n`);
}
