// `llm-router sim`: flags -> startSimEngine, one "listening" line, exit 0 on SIGTERM/SIGINT.
import { UsageError, parseFlags, usage } from '../../router/config/flags.js';
import { startSimEngine, type SimEngine } from './engine.js';
import { SIM_FLAGS, simOptionsFromFlags } from './flags.js';
import { HfSimTokenizer } from './hf-sim-tokenizer.js';
import { tracingSection } from '../../router/config/tracing-config.js';
import { createLogger } from '../../router/util/log.js';
import { VERSION } from '../../version.js';

const SUMMARY = [
  'Run a simulated OpenAI-compatible inference engine (vLLM, SGLang or TGI flavour) for tests, demos and benchmarks.',
  'Phases: refusing connections -> listening but loading -> ready. Control it at runtime with POST /_sim/fault,',
  'GET /_sim/stats and POST /_sim/reset-stats. Flags can also be set as LLM_ROUTER_SIM_<FLAG> environment variables.',
].join('\n');

export async function runSim(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage('sim', SUMMARY, SIM_FLAGS) + '\n');
    return;
  }
  const flags = parseFlags(argv, SIM_FLAGS, { env: process.env, envPrefix: 'LLM_ROUTER_SIM_' }).values;
  let options = simOptionsFromFlags(flags);
  const dir = flags.tokenizer;
  if (dir !== undefined && dir !== '') {
    try {
      options = { ...options, tokenizer: await HfSimTokenizer.load(dir) };
    } catch (err) {
      throw new UsageError(`--tokenizer ${dir}: ${(err as Error).message}`);
    }
  }
  if (options.models?.length === 0) throw new UsageError('--model needs at least one name');
  // its own spans, when asked: the router's module, one SERVER span per request (src/tools/sim/engine.ts)
  const tracingConfig =
    flags['otel-endpoint'] !== undefined && flags['otel-endpoint'] !== ''
      ? tracingSection(
          { 'otel-endpoint': flags['otel-endpoint'], 'otel-service-name': flags['otel-service-name'], 'otel-secure': flags['otel-secure'] },
          process.env,
        )
      : undefined;
  // the OpenTelemetry SDK is loaded only when asked for (it would slow every simulator's start)
  const tracing = tracingConfig
    ? new (await import('../../router/tracing/tracing.js')).Tracing({
        config: tracingConfig,
        version: VERSION,
        worker: null,
        log: createLogger({ level: 'warn', format: 'text' }),
      })
    : undefined;
  if (tracing) options = { ...options, tracer: tracing };

  let engine: SimEngine | undefined;
  // a refused port has no open handle; this keeps the process alive until a signal arrives
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const stop = (): void => {
    clearInterval(keepAlive);
    const closing = (engine ? engine.close() : Promise.resolve()).then(() => tracing?.shutdown(2_000));
    closing.then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  engine = await startSimEngine(options);
  const kv = engine.kvEvents();
  // before the listening line, so that whoever waits for that line can read the ports
  if (kv) process.stdout.write(`sim kv-events on ${kv.endpoint}${kv.replayEndpoint ? ` replay ${kv.replayEndpoint}` : ''}\n`);
  process.stdout.write(`sim listening on ${engine.url}\n`);
}
