// `llm-router serve`: parse settings, start the router, stop cleanly on SIGTERM/SIGINT.
// With --workers N the primary process forks N workers (node:cluster) that share the port; each worker runs
// its own catalog, discovery and prober, so N workers probe every engine N times; the primary answers for the whole
// instance what no worker can alone (its demand and its metrics: src/router/app/primary.ts).
import cluster from 'node:cluster';
import { runPrimary } from '../router/app/primary.js';
import { loadRouterConfig } from '../router/config/config.js';
import { ROUTER_FLAGS } from '../router/config/router-flags.js';
import { RouterApp } from '../router/app/app.js';
import { createLogger } from '../router/util/log.js';
import { usage } from '../router/config/flags.js';

const SUMMARY =
  'Routes OpenAI-compatible requests by model to engines whose model is loaded; answers 404 for unknown models and 503 + Retry-After for declared models with no ready engine.';

export async function runServe(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage('serve', SUMMARY, ROUTER_FLAGS) + '\n');
    return;
  }
  const config = loadRouterConfig(argv);
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  if (config.workers > 1 && cluster.isPrimary) {
    runPrimary(config, log);
    return;
  }
  // under --workers every line says which worker wrote it
  const app = new RouterApp(config, cluster.isWorker && cluster.worker ? log.child({ worker: cluster.worker.id }) : log);
  await app.start();
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    app.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: String(err) }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // a cluster worker also stops when the primary goes away, so no worker outlives it
  if (cluster.isWorker) process.on('disconnect', () => stop('primary-gone'));
}
