// The flow-control benchmark's pure parts (bench/flow-stats.ts, bench/flow.ts): a tenant's figures from its outcomes,
// Jain's index, the Done-when targets, the options and the tables.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffMs, parseFlowArgs, renderFlow, type FlowBenchResult } from '../../bench/flow.js';
import {
  answerShare,
  doneWhenChecks,
  isRefusal,
  jainIndex,
  NOT_AVAILABLE,
  SCENARIOS,
  tenantFigures,
  type Outcome,
  type TenantFigures,
} from '../../bench/flow-stats.js';

function ok(tenant: string, ms: number): Outcome {
  return { tenant, startMs: 0, ms, status: 200, retryAfter: false };
}

function refused(tenant: string, ms: number, status = 429, code = 'overloaded', retryAfter = true): Outcome {
  return { tenant, startMs: 0, ms, status, code, retryAfter, ...(retryAfter ? { retryAfterSeconds: 1 } : {}) };
}

test("a tenant's figures: 200s and their p50/p90, refusals by status and code, how fast, unanswered", () => {
  const outcomes: Outcome[] = [
    ...[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000].map((ms) => ok('x', ms)),
    refused('x', 20),
    refused('x', 150, 503, 'queue_timeout'),
    { tenant: 'x', startMs: 0, ms: 30_000, status: 0, retryAfter: false, failure: 'no answer in time' },
    ok('other', 5),
  ];
  const f = tenantFigures('x', outcomes, 10);
  assert.equal(f.requests, 13);
  assert.equal(f.answered, 10);
  assert.equal(f.answersPerSecond, 1);
  assert.equal(f.p50Ms, 500);
  assert.equal(f.p90Ms, 900);
  assert.deepEqual(f.refusals, { '429 overloaded': 1, '503 queue_timeout': 1 });
  assert.equal(f.refusalP50Ms, 20);
  // one of 13 refused within 100 ms
  assert.equal(f.refusedFastShare, 1 / 13);
  assert.equal(f.unanswered, 1);
  assert.deepEqual(f.firstFailures, ['no answer in time']);
  // the unanswered one is neither a 200 nor a refusal with Retry-After
  assert.equal(f.okOrRetryAfter, false);
  assert.equal(tenantFigures('x', outcomes.slice(0, 12), 10).okOrRetryAfter, true);
  // a 429 without Retry-After breaks it too
  assert.equal(tenantFigures('y', [ok('y', 1), refused('y', 5, 429, 'queue_full', false)], 1).okOrRetryAfter, false);
  const none = tenantFigures('nobody', outcomes, 10);
  assert.equal(none.requests, 0);
  assert.ok(Number.isNaN(none.p50Ms));
});

test('a refusal the Done-when counts is a 429 or 503 with an OpenAI error code (text), not an engine number', () => {
  assert.equal(isRefusal(refused('d', 5)), true);
  assert.equal(isRefusal(refused('d', 5, 503, 'queue_timeout')), true);
  assert.equal(isRefusal(refused('d', 5, 500, 'internal_error')), false);
  assert.equal(isRefusal(refused('d', 5, 503, '503')), false);
  assert.equal(isRefusal({ tenant: 'd', startMs: 0, ms: 5, status: 429, retryAfter: true }), false);
});

test("Jain's index: 1 for equal amounts, 1/n when one has all, between otherwise", () => {
  assert.equal(jainIndex([5, 5, 5]), 1);
  assert.equal(jainIndex([9, 0, 0]), 1 / 3);
  assert.ok(Math.abs(jainIndex([1, 2]) - 9 / 10) < 1e-12);
  assert.ok(Number.isNaN(jainIndex([])));
  assert.ok(Number.isNaN(jainIndex([0, 0])));
});

function figures(tenant: string, over: Partial<TenantFigures>): TenantFigures {
  return {
    tenant,
    requests: 100,
    answered: 100,
    answersPerSecond: 10,
    p50Ms: 400,
    p90Ms: 500,
    refusals: {},
    refusalP50Ms: Number.NaN,
    refusedFastShare: 0,
    okOrRetryAfter: true,
    unanswered: 0,
    firstFailures: [],
    ...over,
  };
}

const UNLOADED = { a: { p50Ms: 360, p90Ms: 380 }, b: { p50Ms: 360, p90Ms: 380 }, c: { p50Ms: 360, p90Ms: 400 } };

test('the Done-when targets: each passes at its limit and fails just past it', () => {
  const pass = [
    figures('a', { answered: 700, refusals: { '503 queue_timeout': 20 } }),
    figures('b', { answered: 300, p50Ms: 820 }),
    figures('c', { p90Ms: 700 }),
    figures('d', { answered: 0, refusedFastShare: 0.9 }),
  ];
  const checks = doneWhenChecks(pass, UNLOADED);
  assert.equal(checks.length, 6);
  assert.deepEqual(
    checks.map((c) => c.met),
    [true, true, true, true, true, true],
  );
  assert.equal(answerShare(pass, 'b', ['a', 'b']), 0.3);
  const fail = [
    figures('a', { answered: 710, okOrRetryAfter: false }),
    figures('b', { answered: 290, p50Ms: 821 }),
    figures('c', { p90Ms: 701 }),
    figures('d', { refusedFastShare: 0.89, unanswered: 1 }),
  ];
  assert.deepEqual(
    doneWhenChecks(fail, UNLOADED).map((c) => c.met),
    [false, false, false, false, false, false],
  );
  // no unloaded figures: the latency targets cannot pass
  const blind = doneWhenChecks(pass, {});
  assert.equal(blind[1]?.met, false);
  assert.equal(blind[2]?.met, false);
});

test('flags: scenario length, --quick, scenarios by name, extra router flags; a refused client waits its Retry-After', () => {
  const d = parseFlowArgs([]);
  assert.equal(d.seconds, 30);
  assert.deepEqual(
    d.scenarios,
    SCENARIOS.map((s) => s.name),
  );
  const q = parseFlowArgs(['--quick', '--flow-scenarios', 'done-when,equal', '--flow-args', '--flow-queue-timeout 5', '--json', 'f.json']);
  assert.equal(q.seconds, 10);
  assert.deepEqual(q.scenarios, ['done-when', 'equal']);
  assert.deepEqual(q.flowArgs, ['--flow-queue-timeout', '5']);
  assert.equal(q.json, 'f.json');
  assert.equal(parseFlowArgs(['--flow-seconds', '12']).seconds, 12);
  assert.throws(() => parseFlowArgs(['--flow-scenarios', 'nope']), /no scenario nope/);
  assert.throws(() => parseFlowArgs(['--flow-seconds', '0']), /positive/);
  assert.equal(backoffMs(refused('a', 1)), 1_000);
  assert.equal(backoffMs({ ...refused('a', 1), retryAfterSeconds: 60 }), 10_000);
  assert.equal(backoffMs(refused('a', 1, 429, 'queue_full', false)), 1_000);
  // the done-when scenario is the issue's
  const dw = SCENARIOS.find((s) => s.name === 'done-when');
  assert.deepEqual(
    dw?.tenants.map((t) => [t.name, t.clients, t.priority]),
    [
      ['a', 40, undefined],
      ['b', 4, undefined],
      ['c', 2, 10],
      ['d', 2, -1],
    ],
  );
});

test('the report: a table per scenario, the unavailable half said so, the targets with pass/fail', () => {
  const spec = SCENARIOS.find((s) => s.name === 'done-when');
  assert.ok(spec);
  const tenants = [
    figures('a', { requests: 910, answered: 910 }),
    figures('b', { requests: 90, answered: 90, p50Ms: 2100 }),
    figures('c', {}),
    figures('d', {}),
  ];
  const result: FlowBenchResult = {
    options: parseFlowArgs(['--quick']),
    engines: { count: 2, flags: ['--max-num-seqs', '4'], promptTokens: 200 },
    flowControlAvailable: false,
    scenarios: [
      {
        spec,
        runs: [
          { config: 'without', available: true, seconds: 10, tenants, unloaded: UNLOADED },
          { config: 'with', available: false, seconds: 10, tenants: [] },
        ],
      },
    ],
    doneWhen: [
      { config: 'without', checks: doneWhenChecks(tenants, UNLOADED) },
      { config: 'with', checks: undefined },
    ],
  };
  const text = renderFlow(result);
  assert.match(text, /### done-when:/);
  // b's share of every tenant's 200s in the table; of a+b's in the targets
  assert.match(text, /\| without \| b \| 4 clients \| 90 \| 90 \| 7\.5 % \| 2100 \/ 500 \| 360 \/ 380 \|/);
  assert.ok(text.includes(`| with | ${NOT_AVAILABLE} |`));
  assert.match(text, /\| b >= 30 % of a\+b's answers \| 9\.0 %: FAIL \| not measured \|/);
});
