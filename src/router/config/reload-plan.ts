// What a new version of the settings file changes, pure: which settings are applied while the router runs (the flags
// marked `live` in router-flags.ts), which wait for a restart (every other one: ports, TLS files, workers, ...), and
// which the file changed in vain because a flag or env sets them. The router runs on the values this gives: the live
// ones from the new version, the others as they were.
import type { FlagSource, FlagValue } from './flags.js';
import { ROUTER_FLAGS, type RouterFlagValues } from './router-flags.js';

/** The flags whose change in the settings file is applied without a restart. */
export const LIVE_FLAGS: ReadonlySet<string> = new Set(ROUTER_FLAGS.filter((f) => 'live' in f).map((f) => f.name));

/** The flag values a configuration is built from, with where each came from and what the settings file gave. */
export interface FlagState {
  readonly values: RouterFlagValues;
  readonly sources: ReadonlyMap<string, FlagSource>;
  readonly fromFile: ReadonlyMap<string, FlagValue>;
}

/** A setting the new version changes that only a restart applies. */
export interface RestartChange {
  readonly name: string;
  /** the values as text (lists comma separated), for the log */
  readonly running: string;
  readonly next: string;
  /** why a setting that is otherwise live waits this time */
  readonly why?: string;
}

export interface ReloadPlan {
  /** live settings whose value changes: applied now */
  readonly live: readonly string[];
  /** settings whose new value differs from the running one and waits for a restart */
  readonly restart: readonly RestartChange[];
  /** settings the file changed where the command line or env wins (its value stays) */
  readonly overridden: readonly { readonly name: string; readonly source: 'flag' | 'env' }[];
  /** what runs from now on: the live settings' new values, every other one as it was */
  readonly values: RouterFlagValues;
  readonly sources: ReadonlyMap<string, FlagSource>;
}

export interface PlanOptions {
  /**
   * KV-cache events are followed (the router started with kvaware or --allow-routing-header): without them, a version
   * that needs them (routing-logic kvaware, allow-routing-header) waits for a restart for those two settings.
   */
  readonly kvEvents: boolean;
}

/** A value as the log and the comparison see it. */
export function shownValue(v: FlagValue | undefined): string {
  if (v === undefined) return '';
  return Array.isArray(v) ? v.join(',') : String(v);
}

function same(a: FlagValue | undefined, b: FlagValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const NEEDS_KV_EVENTS = ['routing-logic', 'allow-routing-header'];

/** Pure: what `next` (the new version, parsed as a start-up parses it) changes of `running`. */
export function planReload(running: FlagState, next: FlagState, opts: PlanOptions): ReloadPlan {
  const now = running.values as Readonly<Record<string, FlagValue | undefined>>;
  const then = next.values as Readonly<Record<string, FlagValue | undefined>>;
  const kvBlocked = !opts.kvEvents && (then['routing-logic'] === 'kvaware' || then['allow-routing-header'] === true);
  const values: Record<string, FlagValue | undefined> = { ...now };
  const sources = new Map(running.sources);
  const live: string[] = [];
  const restart: RestartChange[] = [];
  const overridden: { name: string; source: 'flag' | 'env' }[] = [];
  for (const spec of ROUTER_FLAGS) {
    const name = spec.name;
    const source = next.sources.get(name);
    if ((source === 'flag' || source === 'env') && !same(running.fromFile.get(name), next.fromFile.get(name)) && next.fromFile.has(name))
      overridden.push({ name, source });
    if (same(now[name], then[name])) continue;
    const change = { name, running: shownValue(now[name]), next: shownValue(then[name]) };
    if (!LIVE_FLAGS.has(name)) restart.push(change);
    else if (kvBlocked && NEEDS_KV_EVENTS.includes(name))
      restart.push({
        ...change,
        why: 'kvaware needs KV-cache events, which are set up at start-up (the router started without kvaware or --allow-routing-header)',
      });
    else {
      live.push(name);
      values[name] = then[name];
      const s = next.sources.get(name);
      if (s === undefined) sources.delete(name);
      else sources.set(name, s);
    }
  }
  return { live, restart, overridden, values: values as RouterFlagValues, sources };
}
