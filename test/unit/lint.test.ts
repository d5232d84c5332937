// llm-router lint: each rule on fixture manifests, with file, object, container, severity, why and fix.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LintInputError, parseManifests } from '../../src/tools/lint/load.js';
import { lintObjects, RULES, type Finding, type LintOptions } from '../../src/tools/lint/rules.js';
import { matches, parseSelector, SelectorError } from '../../src/tools/lint/selector.js';
import { desiredState, type WorkloadLike } from '../../src/router/discovery/kubernetes/desired.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'lint');

function lintFixture(name: string, opts: LintOptions = {}): Finding[] {
  const file = path.join(FIXTURES, name);
  return lintObjects(parseManifests(readFileSync(file, 'utf8'), file), opts);
}

/** "severity rule object container", sorted: what a reader checks first. */
const shape = (findings: readonly Finding[]): string[] => findings.map((f) => `${f.severity} ${f.rule} ${f.object} ${f.container}`).sort();

describe('lint rules on fixtures', () => {
  test('the copy-shaped /health-everywhere chart: readiness and startup on /health, short startup budget, no startup probe', () => {
    const findings = lintFixture('health-everywhere.yaml');
    assert.deepEqual(shape(findings), [
      'error probe-on-health Deployment/vllm-llama3-deployment-vllm vllm',
      'error probe-on-health Deployment/vllm-llama3-deployment-vllm vllm',
      'error probe-on-health Deployment/vllm-mistral-deployment-vllm vllm',
      'error startup-budget-too-short Deployment/vllm-llama3-deployment-vllm vllm',
      'warning no-startup-probe Deployment/vllm-mistral-deployment-vllm vllm',
    ]);
    const budget = findings.find((f) => f.rule === 'startup-budget-too-short') as Finding;
    assert.match(budget.why, /15 s \+ 60 x 10 s = 615 s/);
    assert.match(budget.why, /900 s \(annotation llm-router\/expected-load-seconds\)/);
    assert.match(budget.fix, /failureThreshold to 179/);
    const mistral = findings.find((f) => f.rule === 'probe-on-health' && f.object.includes('mistral')) as Finding;
    // the named port resolves against the container's own ports, as the kubelet does
    assert.match(mistral.why, /readinessProbe GET \/health on port 8000/);
    for (const f of findings) {
      assert.ok(f.file.endsWith('health-everywhere.yaml'));
      assert.ok(f.line > 1, 'line of the object');
      assert.equal(f.namespace, 'default');
      assert.ok(f.why.length > 20 && f.fix.length > 10);
    }
  });

  test('readiness and startup on a P/D routing sidecar port are errors; liveness on the engine port is fine', () => {
    const findings = lintFixture('sidecar-port.yaml');
    assert.deepEqual(shape(findings), [
      'error probe-on-sidecar-port Deployment/qwen-decode vllm',
      'error probe-on-sidecar-port Deployment/qwen-decode vllm',
    ]);
    assert.match((findings[0] as Finding).why, /routing-proxy/);
    assert.match((findings[0] as Finding).fix, /8200/);
  });

  test('probes on a port the engine does not listen on; role and engine conventions are understood', () => {
    const findings = lintFixture('port-mismatch.yaml');
    assert.deepEqual(shape(findings), [
      'error probe-port-mismatch StatefulSet/llama-8080 engine',
      'error probe-port-mismatch StatefulSet/llama-8080 engine',
    ]);
    assert.ok(findings.every((f) => /listens on 8080 \(from its --port argument\)/.test(f.why)));
  });

  test('no startup probe with a liveness probe that kills a loading pod; no readiness probe', () => {
    assert.deepEqual(shape(lintFixture('no-startup-probe.yaml')), [
      'warning no-readiness-probe Deployment/tgi-no-readiness tgi',
      'warning no-startup-probe Deployment/llama-killed-while-loading vllm',
    ]);
    // an expected load the liveness budget covers is no finding
    assert.deepEqual(shape(lintFixture('no-startup-probe.yaml', { expectedLoadSeconds: 60 })), [
      'warning no-readiness-probe Deployment/tgi-no-readiness tgi',
    ]);
  });

  test('the router would name the model from the engine arguments, or cannot name it at all', () => {
    const findings = lintFixture('model-name.yaml');
    assert.deepEqual(shape(findings), [
      'warning missing-served-model-name Deployment/llama-by-path vllm',
      'warning missing-served-model-name Deployment/nameless vllm',
    ]);
    assert.match((findings[0] as Finding).why, /"\/models\/llama-3\.1-8b-instruct"/);
  });

  test("workloads the router's selector or namespace would not see (selector read from the router Deployment)", () => {
    const findings = lintFixture('selector.yaml');
    assert.deepEqual(shape(findings), [
      'warning selector-mismatch Deployment/elsewhere vllm',
      'warning selector-mismatch LeaderWorkerSet/unlabelled (leader) vllm-leader',
      'warning selector-mismatch LeaderWorkerSet/unlabelled (leader) vllm-leader',
    ]);
    assert.ok(findings.some((f) => /404\) instead of scaled-to-zero \(503\)/.test(f.why)));
    assert.ok(findings.some((f) => /watches namespace inference; this workload is in staging/.test(f.why)));
    // --selector overrides what the input says
    assert.deepEqual(
      shape(lintFixture('selector.yaml', { selector: 'role=leader' })).filter((s) => s.includes('unlabelled')),
      ['warning selector-mismatch LeaderWorkerSet/unlabelled (leader) vllm-leader'],
    );
  });

  test('P/D: roles the router cannot read, a prefill side with nothing to decode, probes through a sidecar, an unknown protocol', () => {
    const findings = lintFixture('pd.yaml');
    assert.deepEqual(shape(findings), [
      'error pd-prefill-without-decode Deployment/qwen-prefill vllm',
      'error pd-protocol-invalid Deployment/phi-prefill vllm',
      'error pd-role-missing Deployment/llama-decode vllm',
      'error pd-role-missing Pod/mistral-decode vllm',
      'error probe-port-mismatch Pod/olmo-decode vllm',
      'warning pd-decode-probed-through-sidecar Deployment/phi-decode vllm',
    ]);
    const why = (rule: string, object: string): string => findings.find((f) => f.rule === rule && f.object === object)?.why ?? '';
    assert.match(why('pd-role-missing', 'Deployment/llama-decode'), /another workload of "llama-pd" is labelled llm-d\.ai\/role: prefill/);
    assert.match(why('pd-role-missing', 'Pod/mistral-decode'), /a decode engine/);
    assert.match(why('pd-decode-probed-through-sidecar', 'Deployment/phi-decode'), /routing-sidecar on port 8000/);
    assert.match(findings.find((f) => f.rule === 'pd-decode-probed-through-sidecar')?.fix ?? '', /llm-router\/probe-port: "8200"/);
    assert.match(why('probe-port-mismatch', 'Pod/olmo-decode'), /llm-router\/probe-port is 8300, but the engine listens on 8200/);
  });

  test('LoRA: adapters the router cannot load (no runtime loading, no --enable-lora, SGLang with two ranks), an annotation it cannot read, an adapter named like a model', () => {
    const findings = lintFixture('lora.yaml');
    assert.deepEqual(shape(findings), [
      'error lora-annotation-invalid StatefulSet/qwen-bad-annotation vllm',
      'error lora-annotation-invalid StatefulSet/qwen-bad-annotation vllm',
      'error lora-annotation-invalid StatefulSet/qwen-bad-annotation vllm',
      'error lora-not-enabled Deployment/gemma-sglang-lora-off sglang',
      'error lora-not-enabled Deployment/mistral-lora-off vllm',
      'error lora-runtime-loading-off Deployment/gemma-sglang sglang',
      'error lora-runtime-loading-off Deployment/llama-no-runtime-loading vllm',
      'error lora-runtime-loading-off Deployment/phi-half-started vllm',
    ]);
    const whys = (rule: string, object: string): string[] =>
      findings.filter((f) => f.rule === rule && f.object === object).map((f) => f.why);
    assert.match(
      whys('lora-runtime-loading-off', 'Deployment/llama-no-runtime-loading')[0] ?? '',
      /declares "sql-lora", "chat-lora", but the engine runs without VLLM_ALLOW_RUNTIME_LORA_UPDATING=true: .* answers 404 and none of them is served/,
    );
    // the adapter the engine starts with is served; only the other one is named
    assert.match(
      whys('lora-runtime-loading-off', 'Deployment/phi-half-started')[0] ?? '',
      /is "yes" \(vLLM takes 1 or true\).*404 and "phi-code", which the engine does not start with \(--lora-modules\), is served nowhere/,
    );
    assert.match(
      whys('lora-runtime-loading-off', 'Deployment/gemma-sglang')[0] ?? '',
      /--dp-size 2: SGLang loads adapters at run time only with one data-parallel rank, so "gemma-support" is served nowhere/,
    );
    assert.match(whys('lora-not-enabled', 'Deployment/gemma-sglang-lora-off')[0] ?? '', /SGLang answers every load .*LoRA is not enabled/);
    assert.match(
      whys('lora-not-enabled', 'Deployment/mistral-lora-off')[0] ?? '',
      /"mistral-support", but the engine runs without --enable-lora/,
    );
    assert.match(
      whys('lora-annotation-invalid', 'StatefulSet/qwen-bad-annotation').at(-1) ?? '',
      /adapter "llama-3-8b", which is also a model's name/,
    );
  });

  test("LoRA: lint reads the annotation with the router's own reader and parser, so an entry it ignores is one the router ignores", () => {
    const file = path.join(FIXTURES, 'lora.yaml');
    const objects = parseManifests(readFileSync(file, 'utf8'), file);
    const workloads = objects.map((o) => o.object as WorkloadLike).filter((o) => o.kind === 'StatefulSet' || o.kind === 'Deployment');
    const router = desiredState([], workloads, { port: 8000, scheme: 'http', modelLabel: 'model' });
    const ignored = router.invalid.map((i) => i.why.replace(/; that entry is ignored$/, ''));
    assert.equal(ignored.length, 2);
    const linted = lintObjects(objects)
      .filter((f) => f.rule === 'lora-annotation-invalid')
      .map((f) => f.why.replace(/: the router ignores that entry, so no adapter is declared by it$/, ''));
    assert.deepEqual(linted.slice(0, 2), ignored);
    assert.ok(
      router.adapters.some((a) => a.name === 'qwen-support' && a.base === 'qwen3-8b'),
      'the good entry of that annotation is declared',
    );
  });

  test('LoRA: the right ways (runtime loading in env or shell line, every adapter given at start, env lint cannot see) have no findings; each taken away is found', () => {
    assert.deepEqual(lintFixture('lora-good.yaml'), []);
    const text = readFileSync(path.join(FIXTURES, 'lora-good.yaml'), 'utf8');
    const broken: [string, string, string][] = [
      ['"--max-lora-rank", "64"]', '"--max-lora-rank", "64", "--no-enable-lora"]', 'lora-not-enabled Deployment/llama'],
      [
        '{name: VLLM_ALLOW_RUNTIME_LORA_UPDATING, value: "true"}',
        '{name: VLLM_ALLOW_RUNTIME_LORA_UPDATING, value: "false"}',
        'lora-runtime-loading-off Deployment/llama',
      ],
      ['            - support=/adapters/support\n', '', 'lora-runtime-loading-off Deployment/mistral-started-with-adapters'],
      ['"triage", "path"', '"other", "path"', 'lora-runtime-loading-off Deployment/mistral-started-with-adapters'],
      ['VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 exec', 'VLLM_ALLOW_RUNTIME_LORA_UPDATING=0 exec', 'lora-runtime-loading-off StatefulSet/phi'],
      ['          envFrom: [{configMapRef: {name: vllm-env}}]\n', '', 'lora-runtime-loading-off Deployment/qwen'],
    ];
    for (const [from, to, found] of broken) {
      assert.ok(text.includes(from), from);
      const findings = lintObjects(parseManifests(text.replace(from, to), 'lora-good.yaml'));
      assert.deepEqual(
        findings.map((f) => `${f.rule} ${f.object}`),
        [found],
        `${from} -> ${to}`,
      );
    }
  });

  test('KV-aware routing: engines that publish no KV-cache events (or elsewhere), or cache no prefix, behind a kvaware router (its routing logic from its --config ConfigMap)', () => {
    const findings = lintFixture('kvaware.yaml');
    assert.deepEqual(shape(findings), [
      'warning kvaware-no-kv-events Pod/falcon-tgi tgi',
      'warning kvaware-no-kv-events Pod/llama-events-off vllm',
      'warning kvaware-no-kv-events Pod/llama-no-events vllm',
      'warning kvaware-no-kv-events Pod/llama-other-port vllm',
      'warning kvaware-prefix-caching-off Pod/llama-no-prefix-caching vllm',
      'warning kvaware-prefix-caching-off Pod/qwen-no-radix-cache sglang',
      // not behind the router: only the selector finding
      'warning selector-mismatch Pod/llama-elsewhere vllm',
    ]);
    const why = (object: string): string => findings.find((f) => f.object === object && f.rule.startsWith('kvaware'))?.why ?? '';
    const fix = (object: string): string => findings.find((f) => f.object === object && f.rule.startsWith('kvaware'))?.fix ?? '';
    assert.match(why('Pod/llama-no-events'), /runs without --kv-events-config: it publishes nothing/);
    assert.match(
      fix('Pod/llama-no-events'),
      /--kv-events-config '\{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp:\/\/\*:5557"/,
    );
    assert.match(
      why('Pod/llama-events-off'),
      /\{"enable_kv_cache_events": false, "publisher": "zmq"\} \(enable_kv_cache_events is not true\)/,
    );
    assert.match(why('Pod/llama-other-port'), /publishes its KV-cache events on port 6000, but the router subscribes at 5557/);
    assert.match(fix('Pod/llama-other-port'), /llm-router\/kv-events-port: "6000"/);
    assert.match(why('Pod/falcon-tgi'), /TGI publishes none/);
    assert.match(why('Pod/qwen-no-radix-cache'), /--disable-radix-cache: it caches no prefix/);
  });

  test('KV-aware routing: the routing logic is read as the router reads it (flag, then LLM_ROUTER_ROUTING_LOGIC, then --config), or given; the subscribed port too', () => {
    const file = path.join(FIXTURES, 'kvaware.yaml');
    const text = readFileSync(file, 'utf8');
    /** the objects with a KV-cache finding */
    const kvRules = (t: string, opts: LintOptions = {}): string[] => [
      ...new Set(
        lintObjects(parseManifests(t, file), opts)
          .filter((f) => f.rule.startsWith('kvaware'))
          .map((f) => f.object)
          .sort(),
      ),
    ];
    const behindRouter = [
      'Pod/falcon-tgi',
      'Pod/llama-events-off',
      'Pod/llama-no-events',
      'Pod/llama-no-prefix-caching',
      'Pod/llama-other-port',
      'Pod/qwen-no-radix-cache',
    ];
    assert.deepEqual(kvRules(text), behindRouter);
    const routerArgs = '"--service-discovery", "k8s",';
    assert.ok(text.includes(routerArgs));
    // a flag wins over the config file; the env variable too
    assert.deepEqual(kvRules(text.replace(routerArgs, `"--routing-logic", "roundrobin", ${routerArgs}`)), []);
    assert.deepEqual(
      kvRules(
        text.replace(
          '          volumeMounts:',
          '          env: [{name: LLM_ROUTER_ROUTING_LOGIC, value: prefixaware}]\n          volumeMounts:',
        ),
      ),
      [],
    );
    // a config file lint cannot see is no kvaware; nor is another ConfigMap's
    assert.deepEqual(kvRules(text.replace('name: router-config', 'name: other-config')), []);
    // given: it wins over the input's router
    assert.deepEqual(kvRules(text, { routingLogic: 'roundrobin' }), []);
    // without a router in the input, every engine is checked
    const engines = text.split('\n---\n').slice(2).join('\n---\n');
    assert.deepEqual(kvRules(engines), []);
    assert.deepEqual(kvRules(engines, { routingLogic: 'kvaware' }), [...behindRouter, 'Pod/llama-elsewhere'].sort());
    // the router's own --kv-events-port: where it subscribes on pods without the annotation
    assert.deepEqual(kvRules(text, { kvEventsPort: 6000 }), [
      'Pod/falcon-tgi',
      'Pod/llama-events-off',
      'Pod/llama-good',
      'Pod/llama-good-shell',
      'Pod/llama-no-events',
      'Pod/llama-no-prefix-caching',
      'Pod/qwen-no-radix-cache',
      'Pod/sglang-good',
    ]);
    assert.deepEqual(kvRules(text.replace(routerArgs, `"--kv-events-port=6000", ${routerArgs}`)), kvRules(text, { kvEventsPort: 6000 }));
  });

  test('a correct pod (probe sidecar, model-aware probes, named ports, List, SGLang) has no findings', () => {
    assert.deepEqual(lintFixture('good.yaml'), []);
  });

  test('every rule is found by some fixture, and each has an id, a severity and a summary, and a row in the docs', () => {
    const seen = new Set(
      [
        'health-everywhere.yaml',
        'sidecar-port.yaml',
        'port-mismatch.yaml',
        'no-startup-probe.yaml',
        'model-name.yaml',
        'selector.yaml',
        'pd.yaml',
        'lora.yaml',
        'kvaware.yaml',
      ].flatMap((f) => lintFixture(f).map((x) => x.rule)),
    );
    assert.deepEqual([...seen].sort(), RULES.map((r) => r.id).sort());
    for (const r of RULES) assert.ok(/^[a-z-]+$/.test(r.id) && ['error', 'warning'].includes(r.severity) && r.summary.length > 20);
    // docs/operations.md lists every rule with its severity
    const doc = readFileSync(path.join(FIXTURES, '..', '..', '..', 'docs', 'operations.md'), 'utf8');
    for (const r of RULES) assert.ok(doc.includes(`| \`${r.id}\` | ${r.severity} |`), `docs/operations.md lists ${r.id}`);
  });

  test('bad YAML names the file, line and column; an unrendered chart template says so', () => {
    assert.throws(
      () => parseManifests(readFileSync(path.join(FIXTURES, 'bad-yaml.yaml'), 'utf8'), 'bad-yaml.yaml'),
      (err: unknown) => {
        assert.ok(err instanceof LintInputError);
        assert.match(err.message, /^bad-yaml\.yaml:\d+:\d+: not valid YAML: /);
        return true;
      },
    );
    const template = readFileSync(path.join(FIXTURES, 'unrendered', 'deployment.yaml'), 'utf8');
    assert.throws(() => parseManifests(template, 'deployment.yaml'), /unrendered Helm template/);
  });

  test('each finding gives the line and column of what it is about, in a multi-document stream and a List', () => {
    const text = [
      '# two engines, then a List holding a third',
      '---',
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata: {name: a, namespace: ns}',
      'spec:',
      '  template:',
      '    metadata: {labels: {app: a}}',
      '    spec:',
      '      containers:',
      '        - name: sidecar',
      '          image: busybox',
      '        - name: vllm',
      '          image: vllm/vllm-openai',
      '          args: ["--model", "/models/a", "--port", "8000"]',
      '          readinessProbe:',
      '            httpGet:',
      '              path: /health',
      '              port: 8000',
      '          startupProbe:',
      '            httpGet: {path: /v1/models, port: 8000}',
      '            failureThreshold: 3',
      '---',
      'apiVersion: v1',
      'kind: List',
      'items:',
      '  - apiVersion: v1',
      '    kind: Pod',
      '    metadata: {name: b, annotations: {llm-router/models: b}}',
      '    spec:',
      '      containers:',
      '        - name: tgi',
      '          image: ghcr.io/huggingface/text-generation-inference',
      '          readinessProbe: {httpGet: {path: /health, port: 81}}',
      '',
    ].join('\n');
    const findings = lintObjects(parseManifests(text, 'multi.yaml'));
    assert.deepEqual(
      findings.map((f) => `${f.line}:${f.column} ${f.rule} ${f.object}`),
      [
        '15:11 missing-served-model-name Deployment/a',
        '18:15 probe-on-health Deployment/a',
        '22:13 startup-budget-too-short Deployment/a',
        '34:53 probe-port-mismatch Pod/b',
      ],
    );
    const parsed = parseManifests(text, 'multi.yaml');
    assert.deepEqual(
      parsed.map((o) => o.line),
      [3, 27],
    );
    // a path the object does not have gives its nearest ancestor's place
    assert.deepEqual(parsed[0]?.position(['spec', 'template', 'spec', 'containers', 1, 'livenessProbe']), { line: 13, column: 11 });
    assert.deepEqual(parsed[1]?.position(['metadata', 'labels']), { line: 29, column: 5 });
  });

  test('non-engine objects and empty documents are ignored', () => {
    const objects = parseManifests('---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n', 'x.yaml');
    assert.equal(objects.length, 1);
    assert.deepEqual(lintObjects(objects), []);
  });
});

describe('label selectors', () => {
  test('equality, inequality, set and existence terms', () => {
    const labels = { app: 'engine', tier: 'gpu', 'llm-router/role': 'decode' };
    const yes = ['app=engine', 'app==engine,tier', 'app in (engine, other),!missing', 'llm-router/role!=prefill', 'tier notin (cpu)', ''];
    const no = ['app=other', 'missing', '!tier', 'app notin (engine)', 'llm-router/role!=decode'];
    for (const s of yes) assert.equal(matches(parseSelector(s), labels), true, s);
    for (const s of no) assert.equal(matches(parseSelector(s), labels), false, s);
    assert.throws(() => parseSelector('app=(x'), SelectorError);
  });
});
