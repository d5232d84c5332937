// `llm-router lint FILE|DIR|-`: finds probe and discovery mistakes in Kubernetes manifests of inference engines.
// Exit 1 when any finding is an error, 0 with only warnings, 2 when the input cannot be read or parsed.
import { readFileSync } from 'node:fs';
import { UsageError, parseFlags, usage, type FlagSpec } from '../../router/config/flags.js';
import { LintInputError, loadManifests } from './load.js';
import { formatJson, formatRules, formatText, summarise } from './report.js';
import { DEFAULT_EXPECTED_LOAD_SECONDS, lintObjects } from './rules.js';
import { SelectorError } from './selector.js';

const LINT_FLAGS = [
  { name: 'format', kind: 'string', default: 'text', choices: ['text', 'json'], help: 'output format' },
  {
    name: 'expected-load-seconds',
    kind: 'number',
    min: 1,
    help: `seconds an engine takes to load its model; a workload's llm-router/expected-load-seconds annotation wins (default ${DEFAULT_EXPECTED_LOAD_SECONDS})`,
  },
  {
    name: 'selector',
    kind: 'string',
    help: "the router's --k8s-label-selector (default: read from an llm-router Deployment in the input, else not checked)",
  },
  { name: 'model-label', kind: 'string', default: 'model', help: "the router's --k8s-model-label" },
  {
    name: 'routing-logic',
    kind: 'string',
    help: "the router's --routing-logic (default: read from an llm-router Deployment in the input: its args, LLM_ROUTER_ROUTING_LOGIC, its --config ConfigMap); kvaware checks the engines' KV-cache events",
  },
  {
    name: 'kv-events-port',
    kind: 'int',
    min: 1,
    help: "the router's --kv-events-port: where it subscribes on pods without llm-router/kv-events-port (default: the input's router's, else 5557)",
  },
  { name: 'list-rules', kind: 'boolean', help: 'print the rules with their severity and exit' },
  { name: 'help', kind: 'boolean', help: 'print this help' },
] as const satisfies readonly FlagSpec[];

const SUMMARY = [
  'Reads Kubernetes YAML (files, directories, or - for stdin; multi-document; Deployments, StatefulSets,',
  'LeaderWorkerSets, Pods, helm template output) and reports, per inference-engine container, probes that do not',
  'mean "model loaded", startup budgets shorter than the model\'s load, probes on the wrong port, and workloads',
  'the router would not see, or whose LoRA adapters it could not load. Exit 1 on any error, 0 with only warnings, 2',
  'when the input cannot be parsed.',
].join('\n');

export async function runLint(argv: string[]): Promise<void> {
  const parsed = parseFlags(argv, LINT_FLAGS, { env: process.env, envPrefix: 'LLM_ROUTER_LINT_', allowPositionals: true });
  const flags = parsed.values;
  if (flags.help) {
    process.stdout.write(usage('lint FILE|DIR|-...', SUMMARY, LINT_FLAGS) + '\n');
    return;
  }
  if (flags['list-rules']) {
    process.stdout.write(formatRules());
    return;
  }
  if (parsed.positionals.length === 0) throw new UsageError('lint needs a file, a directory, or - for stdin');
  try {
    const loaded = loadManifests(parsed.positionals, () => readFileSync(0, 'utf8'));
    for (const note of loaded.notes) process.stderr.write(`llm-router lint: ${note}\n`);
    const expected = flags['expected-load-seconds'];
    const selector = flags.selector;
    const findings = lintObjects(loaded.objects, {
      ...(expected !== undefined ? { expectedLoadSeconds: expected } : {}),
      ...(selector !== undefined ? { selector } : {}),
      modelLabel: flags['model-label'],
      ...(flags['routing-logic'] !== undefined ? { routingLogic: flags['routing-logic'] } : {}),
      ...(flags['kv-events-port'] !== undefined ? { kvEventsPort: flags['kv-events-port'] } : {}),
    });
    const summary = summarise(findings, loaded.objects.length, loaded.files.length);
    process.stdout.write(flags.format === 'json' ? formatJson(findings, summary) : formatText(findings, summary));
    process.exitCode = summary.errors > 0 ? 1 : 0;
  } catch (err) {
    if (err instanceof LintInputError || err instanceof SelectorError) {
      process.stderr.write(`llm-router lint: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
}
