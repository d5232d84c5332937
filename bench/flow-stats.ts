// The flow-control benchmark's pure parts (bench/flow.ts runs the processes): the scenarios, the figures of each tenant
// from its requests' outcomes, Jain's fairness index, the issue's Done-when targets and the tables.
import { percentile } from './routing-quality.js';

/** One tenant's traffic: closed-loop clients (each sends its next request when its last one ended) or an open-loop rate. */
export interface TenantLoad {
  /** sent as x-gateway-inference-fairness-id */
  readonly name: string;
  /** sent as x-llm-router-priority when set (negative: sheddable) */
  readonly priority?: number;
  readonly clients?: number;
  /** requests per second, Poisson arrivals from a fixed seed, whatever the answers */
  readonly rate?: number;
}

export interface ScenarioSpec {
  readonly name: string;
  readonly title: string;
  readonly tenants: readonly TenantLoad[];
  /** tenants with the same offered load: Jain's index over their answers */
  readonly equal?: readonly string[];
  /** measure each tenant alone first (its unloaded p50/p90), with at most this many clients */
  readonly unloadedClients?: number;
}

/**
 * The engines' capacity: two engines of 4 sequences at ~0.36 s a request, about 22 requests/s; the open-loop scenarios
 * offer about 1.5 times that.
 */
export const SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: 'done-when',
    title: "the issue's Done-when: a 40 clients, b 4, c 2 at priority 10, d 2 at priority -1 (sheddable)",
    tenants: [
      { name: 'a', clients: 40 },
      { name: 'b', clients: 4 },
      { name: 'c', clients: 2, priority: 10 },
      { name: 'd', clients: 2, priority: -1 },
    ],
    unloadedClients: 4,
  },
  {
    name: 'noisy',
    title: 'noisy neighbour: heavy at 10 x light rate (30/s and 3/s, open loop)',
    tenants: [
      { name: 'heavy', rate: 30 },
      { name: 'light', rate: 3 },
    ],
  },
  {
    name: 'priority',
    title: 'a high priority under a low-priority flood: flood 30/s at priority 0, vip 2/s at priority 10 (open loop)',
    tenants: [
      { name: 'flood', rate: 30, priority: 0 },
      { name: 'vip', rate: 2, priority: 10 },
    ],
  },
  {
    name: 'sheddable',
    title: 'sheddable traffic: online 20 clients at priority 0, batch 10 clients at priority -1',
    tenants: [
      { name: 'online', clients: 20, priority: 0 },
      { name: 'batch', clients: 10, priority: -1 },
    ],
  },
  {
    name: 'equal',
    title: 'equal tenants: t1, t2, t3 at 10/s each (open loop)',
    tenants: [
      { name: 't1', rate: 10 },
      { name: 't2', rate: 10 },
      { name: 't3', rate: 10 },
    ],
    equal: ['t1', 't2', 't3'],
  },
];

/** How one request ended, as the client saw it. */
export interface Outcome {
  readonly tenant: string;
  /** ms from the start of the run to the request's start */
  readonly startMs: number;
  /** ms from its start to the end of its answer (or to when the client gave up) */
  readonly ms: number;
  /** the answer's status; 0 when none came (the client's time bound, a socket error) */
  readonly status: number;
  /** `error.code` of an error answer, as text (the router's are strings: `overloaded`, `queue_full`, ...) */
  readonly code?: string;
  readonly retryAfter: boolean;
  /** Retry-After in seconds, when it came as a number */
  readonly retryAfterSeconds?: number;
  /** why no answer came */
  readonly failure?: string;
}

/** A refusal the Done-when counts: 429 or 503 with an OpenAI error code (a string `error.code`). */
export function isRefusal(o: Outcome): boolean {
  return (o.status === 429 || o.status === 503) && typeof o.code === 'string' && o.code !== '' && Number.isNaN(Number(o.code));
}

export interface TenantFigures {
  readonly tenant: string;
  readonly requests: number;
  /** 200s */
  readonly answered: number;
  readonly answersPerSecond: number;
  /** latency of the 200s, ms */
  readonly p50Ms: number;
  readonly p90Ms: number;
  /** error answers by "status code" (e.g. "429 overloaded"; an answer without a code: its status alone) */
  readonly refusals: Readonly<Record<string, number>>;
  /** p50 of the time the error answers took, ms */
  readonly refusalP50Ms: number;
  /** share of the tenant's requests refused (429/503 with an OpenAI error code) within 100 ms */
  readonly refusedFastShare: number;
  /** every request answered 200, or 429/503 with Retry-After */
  readonly okOrRetryAfter: boolean;
  /** requests with no answer (the client's bound, or a socket error) */
  readonly unanswered: number;
  readonly firstFailures: readonly string[];
}

export const FAST_REFUSAL_MS = 100;

/** A tenant's figures from its outcomes over a run of `seconds`. */
export function tenantFigures(tenant: string, outcomes: readonly Outcome[], seconds: number): TenantFigures {
  const mine = outcomes.filter((o) => o.tenant === tenant);
  const ok = mine.filter((o) => o.status === 200);
  const latencies = ok.map((o) => o.ms).sort((x, y) => x - y);
  const errors = mine.filter((o) => o.status !== 200 && o.status !== 0);
  const refusals: Record<string, number> = {};
  for (const o of errors) {
    const key = o.code !== undefined && o.code !== '' ? `${o.status} ${o.code}` : String(o.status);
    refusals[key] = (refusals[key] ?? 0) + 1;
  }
  const unanswered = mine.filter((o) => o.status === 0);
  return {
    tenant,
    requests: mine.length,
    answered: ok.length,
    answersPerSecond: seconds > 0 ? ok.length / seconds : Number.NaN,
    p50Ms: percentile(latencies, 50),
    p90Ms: percentile(latencies, 90),
    refusals,
    refusalP50Ms: percentile(
      errors.map((o) => o.ms).sort((x, y) => x - y),
      50,
    ),
    refusedFastShare: mine.length > 0 ? mine.filter((o) => isRefusal(o) && o.ms <= FAST_REFUSAL_MS).length / mine.length : Number.NaN,
    okOrRetryAfter: mine.every((o) => o.status === 200 || ((o.status === 429 || o.status === 503) && o.retryAfter)),
    unanswered: unanswered.length,
    firstFailures: [...new Set(unanswered.map((o) => o.failure ?? 'no answer'))].slice(0, 3),
  };
}

/** Jain's fairness index of the amounts: 1 when all are equal, 1/n when one has everything; NaN for none or all zero. */
export function jainIndex(amounts: readonly number[]): number {
  const sum = amounts.reduce((s, x) => s + x, 0);
  const squares = amounts.reduce((s, x) => s + x * x, 0);
  if (amounts.length === 0 || squares === 0) return Number.NaN;
  return (sum * sum) / (amounts.length * squares);
}

/** `tenant`'s share of the answers of `group` (e.g. b's of a+b's). */
export function answerShare(figures: readonly TenantFigures[], tenant: string, group: readonly string[]): number {
  const of = (name: string): number => figures.find((f) => f.tenant === name)?.answered ?? 0;
  const total = group.reduce((s, name) => s + of(name), 0);
  return total > 0 ? of(tenant) / total : Number.NaN;
}

export interface Unloaded {
  readonly p50Ms: number;
  readonly p90Ms: number;
}

export interface TargetCheck {
  readonly target: string;
  /** what was measured, in words and numbers */
  readonly measured: string;
  readonly met: boolean;
}

const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)} ms` : '-');
const pct = (v: number): string => (Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : '-');

/** The issue's Done-when over the done-when scenario's tenants a, b, c, d and their unloaded latencies. */
export function doneWhenChecks(figures: readonly TenantFigures[], unloaded: Readonly<Record<string, Unloaded>>): TargetCheck[] {
  const f = (name: string): TenantFigures | undefined => figures.find((x) => x.tenant === name);
  const a = f('a');
  const b = f('b');
  const c = f('c');
  const d = f('d');
  const share = answerShare(figures, 'b', ['a', 'b']);
  const bLimit = 2 * (unloaded.b?.p50Ms ?? Number.NaN) + 100;
  const cLimit = 1.5 * (unloaded.c?.p90Ms ?? Number.NaN) + 100;
  const hung = figures.reduce((s, x) => s + x.unanswered, 0);
  return [
    { target: "b >= 30 % of a+b's answers", measured: pct(share), met: share >= 0.3 },
    {
      target: "b's p50 <= 2 x its unloaded p50 + 100 ms",
      measured: `${ms(b?.p50Ms ?? Number.NaN)} (limit ${ms(bLimit)})`,
      met: b !== undefined && b.p50Ms <= bLimit,
    },
    {
      target: "c's p90 <= 1.5 x its unloaded p90 + 100 ms",
      measured: `${ms(c?.p90Ms ?? Number.NaN)} (limit ${ms(cLimit)})`,
      met: c !== undefined && c.p90Ms <= cLimit,
    },
    {
      target: ">= 90 % of d's requests refused within 100 ms with 429/503 and an OpenAI error code",
      measured: pct(d?.refusedFastShare ?? Number.NaN),
      met: d !== undefined && d.refusedFastShare >= 0.9,
    },
    {
      target: 'every request of a answered 200, or 429/503 with Retry-After',
      measured: a ? `${a.answered} of ${a.requests} 200; others ${refusalText(a.refusals)}` : '-',
      met: a !== undefined && a.requests > 0 && a.okOrRetryAfter,
    },
    {
      target: 'none hangs (every request answered within its bound)',
      measured: `${hung} unanswered`,
      met: hung === 0 && figures.length > 0,
    },
  ];
}

export function refusalText(refusals: Readonly<Record<string, number>>): string {
  const entries = Object.entries(refusals).sort((x, y) => y[1] - x[1]);
  return entries.length === 0 ? 'none' : entries.map(([k, n]) => `${k} x${n}`).join(', ');
}

// ---- tables ----

/** One scenario run with one configuration, as the tables show it. */
export interface RunFigures {
  /** `without` or `with` flow control */
  readonly config: string;
  /** false: this build refused --flow-control */
  readonly available: boolean;
  readonly seconds: number;
  readonly tenants: readonly TenantFigures[];
  /** each tenant alone first (done-when) */
  readonly unloaded?: Readonly<Record<string, Unloaded>>;
  /** Jain's index over the equal tenants' answers */
  readonly jain?: number;
  /** the engines' own view, sampled while it ran: mean and peak of waiting per engine, mean KV-cache usage */
  readonly engines?: { readonly meanWaiting: number; readonly maxWaiting: number; readonly meanKvUsage: number };
}

function cell(v: number, digits = 0): string {
  return Number.isFinite(v) ? v.toFixed(digits) : '-';
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return [header, header.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

export const NOT_AVAILABLE = 'flow control not available in this build (the router refused --flow-control)';

/** The table of one scenario: a row per tenant and configuration. */
export function renderScenario(spec: ScenarioSpec, runs: readonly RunFigures[]): string {
  const lines = [`### ${spec.name}: ${spec.title}`, ''];
  const rows: string[][] = [];
  for (const run of runs) {
    if (!run.available) {
      rows.push([run.config, NOT_AVAILABLE, '', '', '', '', '', '', '', '', '', '']);
      continue;
    }
    const group = spec.tenants.map((t) => t.name);
    for (const f of run.tenants) {
      const load = spec.tenants.find((t) => t.name === f.tenant);
      const unloaded = run.unloaded?.[f.tenant];
      rows.push([
        run.config,
        `${f.tenant}${load?.priority !== undefined ? ` (priority ${load.priority})` : ''}`,
        load?.clients !== undefined ? `${load.clients} clients` : `${load?.rate ?? '-'}/s`,
        String(f.requests),
        String(f.answered),
        pct(answerShare(run.tenants, f.tenant, group)),
        `${cell(f.p50Ms)} / ${cell(f.p90Ms)}`,
        unloaded ? `${cell(unloaded.p50Ms)} / ${cell(unloaded.p90Ms)}` : '',
        refusalText(f.refusals),
        Object.keys(f.refusals).length > 0 ? `${cell(f.refusalP50Ms)} ms; ${pct(f.refusedFastShare)} <= 100 ms` : '',
        f.okOrRetryAfter ? 'yes' : 'no',
        f.unanswered === 0 ? '0' : `${f.unanswered} (${f.firstFailures.join('; ')})`,
      ]);
    }
  }
  lines.push(
    table(
      [
        'config',
        'tenant',
        'load',
        'requests',
        '200s',
        'share of 200s',
        'p50 / p90 ms',
        'unloaded p50 / p90 ms',
        'refusals',
        'refusals: p50; fast',
        '200 or Retry-After',
        'unanswered',
      ],
      rows,
    ),
  );
  const notes = runs
    .filter((r) => r.available)
    .map((r) => {
      const parts: string[] = [];
      if (r.jain !== undefined) parts.push(`Jain's index over ${spec.equal?.join(', ')}: ${cell(r.jain, 3)}`);
      if (r.engines)
        parts.push(
          `engines: waiting mean ${cell(r.engines.meanWaiting, 1)}, peak ${cell(r.engines.maxWaiting)}; KV-cache usage mean ${pct(r.engines.meanKvUsage)}`,
        );
      return parts.length > 0 ? `- ${r.config}: ${parts.join('; ')}` : '';
    })
    .filter((l) => l !== '');
  if (notes.length > 0) lines.push('', ...notes);
  return lines.join('\n');
}

/** The Done-when targets, without and with flow control side by side. */
export function renderChecks(byConfig: ReadonlyArray<{ config: string; checks: readonly TargetCheck[] | undefined }>): string {
  const targets = byConfig.find((c) => c.checks)?.checks?.map((c) => c.target) ?? [];
  const rows = targets.map((target) => [
    target,
    ...byConfig.map((c) => {
      const check = c.checks?.find((x) => x.target === target);
      return check ? `${check.measured}: ${check.met ? 'PASS' : 'FAIL'}` : 'not measured';
    }),
  ]);
  return ['### Done-when targets (issue 31)', '', table(['target', ...byConfig.map((c) => c.config)], rows)].join('\n');
}
