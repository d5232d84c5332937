// `llm-router serve`: parse settings, start the router, stop cleanly on SIGTERM/SIGINT.
import { loadRouterConfig } from '../config/config.js';
import { ROUTER_FLAGS } from '../config/router-flags.js';
import { RouterApp } from '../server/app.js';
import { createLogger } from '../util/log.js';
import { usage } from './flags.js';

const SUMMARY = 'Routes OpenAI-compatible requests by model to engines whose model is loaded; answers 404 for unknown models and 503 + Retry-After for declared models with no ready engine.';

export async function runServe(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage('serve', SUMMARY, ROUTER_FLAGS) + '\n');
    return;
  }
  const config = loadRouterConfig(argv);
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
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
}
