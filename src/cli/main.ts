#!/usr/bin/env node
// Entry point: picks the subcommand and hands it its own arguments; each command parses its flags.
import { UsageError } from '../router/config/flags.js';
import { StartupError } from '../router/core/startup-error.js';
import { didYouMean } from '../router/util/suggest.js';

const COMMANDS: Record<string, { summary: string; load: () => Promise<(argv: string[]) => Promise<void>> }> = {
  serve: { summary: 'run the router', load: async () => (await import('./serve.js')).runServe },
  sim: {
    summary: 'run a simulated OpenAI-compatible engine (vLLM, SGLang, TGI flavours)',
    load: async () => (await import('../tools/sim/cli.js')).runSim,
  },
  lint: {
    summary: 'check Kubernetes manifests of inference engines for probe and discovery mistakes',
    load: async () => (await import('../tools/lint/cli.js')).runLint,
  },
  probe: {
    summary: 'readiness sidecar for an engine pod: /ready is 200 only when the model is loaded',
    load: async () => (await import('../tools/probe/cli.js')).runProbe,
  },
  demo: {
    summary: 'run the router in front of simulated engines on 127.0.0.1:8001',
    load: async () => (await import('../tools/demo/demo.js')).runDemo,
  },
};

function topUsage(): string {
  const lines = ['usage: llm-router [command] [flags]   (no command: serve)', '', 'commands:'];
  for (const [name, c] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(8)} ${c.summary}`);
  lines.push('', "run 'llm-router <command> --help' for the flags of a command");
  return lines.join('\n');
}

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  // loaded only when serving: the other commands do not pay for the router's modules
  const serve = (): Promise<(argv: string[]) => Promise<void>> => (COMMANDS.serve as (typeof COMMANDS)[string]).load();
  if (name === '--help' || name === '-h' || name === 'help') {
    // the commands, then the flags of serve, which is what runs without a command
    process.stdout.write(`${topUsage()}\n\n`);
    return (await serve())(['--help']);
  }
  // like vllm_router's binary: no command serves (a container configured through LLM_ROUTER_* env only)
  if (name === undefined) return (await serve())([]);
  if (name === '--version' || name === 'version') {
    const { VERSION } = await import('../version.js');
    process.stdout.write(`llm-router ${VERSION}\n`);
    return;
  }
  const command = COMMANDS[name];
  // vllm_router takes its flags with no subcommand: treat a leading flag as `serve` so binaries can be swapped
  if (!command && name.startsWith('--')) return (await serve())(argv);
  if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}${didYouMean(name, Object.keys(COMMANDS))}\n\n${topUsage()}`);
  await (await command.load())(rest);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof StartupError) {
    // something the operator can fix, said in one line: no stack
    process.stderr.write(`llm-router: ${err.message}\n`);
    process.exit(err.exitCode);
  }
  if (err instanceof UsageError) {
    process.stderr.write(`llm-router: ${err.message}\n`);
    if (!err.message.includes('\n')) process.stderr.write("run 'llm-router --help' or 'llm-router <command> --help' for usage\n");
    process.exit(err.exitCode);
  }
  process.stderr.write(`llm-router: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
