// `llm-router serve`: parse settings, start the router, stop cleanly on SIGTERM/SIGINT.
// With --workers N the primary process forks N workers (node:cluster) that share the port; each worker runs
// its own catalog, discovery and prober, so N workers probe every engine N times; the primary answers for the whole
// instance what no worker can alone (its demand and its metrics: src/router/app/primary.ts).
import cluster from 'node:cluster';
import { loadRouterSettings, requireSomethingToRoute } from '../router/config/config.js';
import { loadKubernetesClient, usesKubernetes } from '../router/discovery/kubernetes/client.js';
import { REFUSED_FLAGS, ROUTER_FLAGS } from '../router/config/router-flags.js';
import { workerSettings } from '../router/app/config-reload.js';
import { createLogger } from '../router/util/log.js';
import { usage } from '../router/config/flags.js';

const SUMMARY =
  'Routes OpenAI-compatible requests by model to engines whose model is loaded; answers 404 for unknown models and 503 + Retry-After for declared models with no ready engine.';

export async function runServe(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage('serve', SUMMARY, ROUTER_FLAGS, REFUSED_FLAGS) + '\n');
    return;
  }
  // a worker of --workers starts from its primary's settings in force, not from the file as it is now
  const settings = (cluster.isWorker ? workerSettings(argv, process.env) : undefined) ?? loadRouterSettings(argv);
  const { config } = settings;
  requireSomethingToRoute(config);
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  if (usesKubernetes(config)) await loadKubernetesClient();
  // the router itself is loaded once its settings are known good: a refused start costs no more than reading the flags
  if (config.workers > 1 && cluster.isPrimary) {
    const { runPrimary } = await import('../router/app/primary.js');
    runPrimary(settings, argv, process.env, log);
    return;
  }
  const { RouterApp } = await import('../router/app/app.js');
  // under --workers every line says which worker wrote it
  const app = new RouterApp(config, cluster.isWorker && cluster.worker ? log.child({ worker: cluster.worker.id }) : log);
  // the signal handlers are in place before the router says it listens: a SIGTERM right after that line (a pod deleted
  // as it starts) is a graceful stop, not the default action that kills the process
  // the settings file is followed once the router serves (under --workers, the versions its primary reads)
  const started = app.start().then(() => app.followConfig(settings, argv, process.env));
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) {
      // a second Ctrl-C means now: the requests still in flight are cut
      if (signal === 'SIGINT') {
        log.warn({ signal }, 'second SIGINT: exiting now without waiting for the requests in flight');
        process.exit(130);
      }
      return;
    }
    stopping = true;
    log.info({ signal }, signal === 'SIGINT' ? 'shutting down (Ctrl-C again to exit at once)' : 'shutting down');
    started
      .then(() => app.stop())
      .then(
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
  await started;
}
