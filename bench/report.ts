// The one table the benchmark prints, with ratios measured in the same run, and the check against the targets.

export interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly direct?: number | undefined;
  readonly nginx?: number | undefined;
  /** the minimal node:http + undici proxy (bench/floor-proxy.ts) */
  readonly floor?: number | undefined;
  readonly router?: number | undefined;
  /** the router with undici's Pool as its engine client instead of its own (LLM_ROUTER_ENGINE_CLIENT=undici) */
  readonly undici?: number | undefined;
  /** print ratios for this row */
  readonly ratios?: boolean;
  /** e.g. ">= 1.0x nginx"; `met` says whether this run reached it */
  readonly target?: string;
  readonly met?: boolean | undefined;
  readonly digits?: number;
}

function num(v: number | undefined, digits: number): string {
  if (v === undefined || Number.isNaN(v)) return '-';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !b || Number.isNaN(a) || Number.isNaN(b)) return '-';
  return `${(a / b).toFixed(2)}x`;
}

export function renderTable(rows: readonly Row[]): string {
  const header = [
    'scenario',
    'metric',
    'direct',
    'nginx',
    'node floor',
    'router',
    'router, undici client',
    'router/nginx',
    'undici client/nginx',
    'router/direct',
    'router/floor',
    'target',
  ];
  const body = rows.map((r) => {
    const d = r.digits ?? 0;
    return [
      r.scenario,
      r.metric,
      num(r.direct, d),
      num(r.nginx, d),
      num(r.floor, d),
      num(r.router, d),
      num(r.undici, d),
      r.ratios ? ratio(r.router, r.nginx) : '',
      r.ratios ? ratio(r.undici, r.nginx) : '',
      r.ratios ? ratio(r.router, r.direct) : '',
      r.ratios ? ratio(r.router, r.floor) : '',
      r.target ? `${r.target} ${r.met === undefined ? '(not measured)' : r.met ? 'MET' : 'MISSED'}` : '',
    ];
  });
  const lines = [header, header.map(() => '---'), ...body].map((cells) => `| ${cells.join(' | ')} |`);
  return lines.join('\n');
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}
