// `llm-router serve`: parse settings, start the router, stop cleanly on SIGTERM/SIGINT.
// With --workers N the primary process only forks N workers (node:cluster) that share the port; each worker runs
// its own catalog, discovery and prober, so N workers probe every engine N times.
import cluster, { type Worker } from 'node:cluster';
import { loadRouterConfig, type RouterConfig } from '../config/config.js';
import { ROUTER_FLAGS } from '../config/router-flags.js';
import { RouterApp } from '../server/app.js';
import { createLogger, type Logger } from '../util/log.js';
import { usage } from './flags.js';

const SUMMARY = 'Routes OpenAI-compatible requests by model to engines whose model is loaded; answers 404 for unknown models and 503 + Retry-After for declared models with no ready engine.';

/** A worker that dies this soon after its start is not restarted: it would only crash again (bad config, port taken). */
const MIN_WORKER_LIFETIME_MS = 5_000;

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
  const app = new RouterApp(config, log);
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

/** Forks the workers, restarts one that dies while running, and forwards SIGTERM/SIGINT to all of them. */
function runPrimary(config: RouterConfig, log: Logger): void {
  let stopping = false;
  let exitCode = 0;
  const startedAt = new Map<Worker, number>();
  const fork = (): void => {
    const worker = cluster.fork();
    startedAt.set(worker, Date.now());
  };
  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (startedAt.get(worker) ?? 0);
    startedAt.delete(worker);
    if (stopping) {
      if (startedAt.size === 0) process.exit(exitCode);
      return;
    }
    if (lived < MIN_WORKER_LIFETIME_MS) {
      log.fatal({ worker: worker.process.pid, code, signal }, 'a router worker exited right after its start; stopping');
      stop('worker-failed', 1);
      return;
    }
    log.error({ worker: worker.process.pid, code, signal }, 'a router worker exited; starting another');
    fork();
  });
  const stop = (signal: string, code = 0): void => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ signal, workers: startedAt.size }, 'shutting down');
    for (const worker of startedAt.keys()) worker.process.kill('SIGTERM');
    if (startedAt.size === 0) process.exit(exitCode);
    // the workers have their own grace period; this only bounds a worker that hangs
    setTimeout(() => process.exit(exitCode || 1), 15_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  for (let i = 0; i < config.workers; i++) fork();
  log.info({ workers: config.workers, port: config.port }, 'llm-router primary started its workers');
}
