// The settings file followed while the router runs (--config, --dynamic-config-yaml/json). Each new version is parsed
// with the same argv and env and checked as a start-up checks it; one that fails any check is refused whole (the last
// good one stays, a WARN line names the file and the error). A good one is planned (config/reload-plan.ts): the live
// settings it changes are applied, those that need a restart are said once each, and those a flag or env overrides
// are said too. Every outcome is counted (metrics/config-metrics.ts).
//
// One process reads the file: the router itself, or under --workers the primary, which hands each applied version to
// every worker (numbered, so a worker never goes back to an older one); a worker is started with the settings in
// force (WORKER_SETTINGS_ENV), never from the file as it is then, and asks for any version applied since. So every worker runs the version the primary read, and says nothing the primary already said.
import { createHash } from 'node:crypto';
import {
  buildRouterConfig,
  explicitIn,
  loadRouterSettings,
  requireSomethingToRoute,
  type RouterConfig,
  type RouterSettings,
} from '../config/config.js';
import { configFileOf } from '../config/config-file.js';
import type { FlagSource, FlagValue } from '../config/flags.js';
import { type FlagState, planReload, type ReloadPlan } from '../config/reload-plan.js';
import type { RouterFlagValues } from '../config/router-flags.js';
import type { ConfigMetrics, ReloadResult } from '../metrics/config-metrics.js';
import { FileWatch } from '../util/file-watch.js';
import type { WorkerLink } from '../util/ipc.js';
import type { Logger } from '../util/log.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What the primary of --workers sends its workers (each applied version) and answers a worker that asks. */
export const CONFIG_TOPICS = { version: 'config:version', current: 'config:current' } as const;

/** A version of the settings in force, as it travels to the workers: plain JSON. */
export interface ConfigVersion {
  /** 0 for the start-up's; each applied version one more */
  readonly seq: number;
  /** sha256 of the file's text it was read from */
  readonly sha256: string;
  readonly values: Readonly<Record<string, FlagValue>>;
  readonly sources: Readonly<Record<string, FlagSource>>;
}

/**
 * The variable a worker of --workers is started with: the settings in force in its primary (a ConfigVersion as JSON),
 * which it starts from instead of reading the file itself.
 */
export const WORKER_SETTINGS_ENV = 'LLM_ROUTER_WORKER_SETTINGS';

/** A worker's start-up settings: its primary's version in force (WORKER_SETTINGS_ENV), when it was given one. */
export function workerSettings(argv: readonly string[], env: Env): RouterSettings | undefined {
  const text = env[WORKER_SETTINGS_ENV];
  if (text === undefined) return undefined;
  const version = parseConfigVersion(JSON.parse(text));
  if (version === undefined) throw new Error(`${WORKER_SETTINGS_ENV} holds no settings`);
  const values = version.values as unknown as RouterFlagValues;
  const sources = new Map(Object.entries(version.sources));
  return {
    config: buildRouterConfig(values, explicitIn(sources), env),
    values,
    sources,
    fromFile: new Map(),
    file: configFileOf(argv, env),
    fileText: undefined,
  };
}

/** A new configuration to run: `config`, of which the settings named in `live` changed. */
export interface ConfigChange {
  readonly config: RouterConfig;
  readonly live: ReadonlySet<string>;
  readonly version: ConfigVersion;
}

export function textHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function versionOf(seq: number, sha256: string, state: Pick<FlagState, 'values' | 'sources'>): ConfigVersion {
  const values: Record<string, FlagValue> = {};
  for (const [k, v] of Object.entries(state.values as Readonly<Record<string, FlagValue | undefined>>)) if (v !== undefined) values[k] = v;
  return { seq, sha256, values, sources: Object.fromEntries(state.sources) };
}

/** A version as the IPC channel delivered it, or undefined when it is not one. */
export function parseConfigVersion(v: unknown): ConfigVersion | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Partial<Record<keyof ConfigVersion, unknown>>;
  if (typeof o.seq !== 'number' || typeof o.sha256 !== 'string') return undefined;
  if (typeof o.values !== 'object' || o.values === null || typeof o.sources !== 'object' || o.sources === null) return undefined;
  return o as ConfigVersion;
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
}

export interface ReloaderOptions {
  readonly argv: readonly string[];
  readonly env: Env;
  /** the start-up's settings, read from the file (`file` and `fileText` are set) */
  readonly settings: RouterSettings;
  readonly log: Logger;
  readonly metrics: ConfigMetrics;
  /** KV-cache events are followed (set up at start-up only) */
  readonly kvEvents: boolean;
  /** applies a new version (in this process, or handed to the workers) */
  readonly apply: (change: ConfigChange) => void;
  /** the file's re-read interval; default --config-reload-interval */
  readonly intervalMs?: number;
}

/** Follows the settings file in the process that reads it (the router, or the primary of --workers). */
export class ConfigReloader {
  private running: FlagState;
  private version: ConfigVersion;
  /** the last text read (or read failure), valid or not: the same again is no new version */
  private lastRead: string;
  /** settings whose new value waits for a restart, as last said: each is said once per value */
  private readonly pending = new Map<string, string>();
  private readonly watch: FileWatch;
  private readonly where: string;

  constructor(private readonly opts: ReloaderOptions) {
    const { settings } = opts;
    if (settings.file === undefined || settings.fileText === undefined) throw new Error('ConfigReloader: no settings file');
    this.where = `${settings.file.flag} ${settings.file.path}`;
    this.running = settings;
    this.lastRead = settings.fileText;
    this.version = versionOf(0, textHash(settings.fileText), settings);
    opts.metrics.inForce(this.version.sha256, Date.now());
    this.watch = new FileWatch({
      path: settings.file.path,
      intervalMs: opts.intervalMs ?? Math.round(settings.values['config-reload-interval'] * 1000),
      onText: (text) => this.offer(text),
      onError: (err) => this.readFailed(err),
    });
  }

  start(): void {
    this.watch.start();
  }

  stop(): void {
    this.watch.stop();
  }

  /** The version in force (a worker that starts asks for it). */
  current(): ConfigVersion {
    return this.version;
  }

  /** The file could not be read: refused like an invalid version (said once per reason). */
  readFailed(err: Error): ReloadResult | undefined {
    const key = `\0${messageOf(err)}`;
    if (key === this.lastRead) return undefined;
    this.lastRead = key;
    return this.refuse(new Error(`cannot be read: ${messageOf(err)}`));
  }

  /** The file's text as just read: a new version is refused, changes nothing, or is applied. Undefined: the same text. */
  offer(text: string): ReloadResult | undefined {
    if (text === this.lastRead) return undefined;
    this.lastRead = text;
    const sha256 = textHash(text);
    let plan: ReloadPlan;
    let config: RouterConfig;
    try {
      const next = loadRouterSettings(this.opts.argv, this.opts.env, text);
      requireSomethingToRoute(next.config);
      plan = planReload(this.running, next, { kvEvents: this.opts.kvEvents });
      // what runs: the live settings' new values with the others as they are (a check across both may still fail)
      config = buildRouterConfig(plan.values, explicitIn(plan.sources), this.opts.env);
      requireSomethingToRoute(config);
      this.tell(plan);
      this.running = { values: plan.values, sources: plan.sources, fromFile: next.fromFile };
    } catch (err) {
      return this.refuse(err);
    }
    if (plan.live.length === 0) {
      this.opts.metrics.reloaded('unchanged', sha256);
      this.opts.log.info({ file: this.where, sha256 }, `${this.where}: new version read; nothing that runs changes`);
      return 'unchanged';
    }
    this.version = versionOf(this.version.seq + 1, sha256, plan);
    try {
      this.opts.apply({ config, live: new Set(plan.live), version: this.version });
    } catch (err) {
      // checked as a start-up checks it, the version should apply; a part that could not is said, the rest stands
      this.opts.log.error({ file: this.where, error: messageOf(err) }, `${this.where}: applying the new version failed`);
    }
    this.opts.metrics.reloaded('applied', sha256);
    this.opts.log.info({ file: this.where, sha256, changed: plan.live }, `${this.where}: new version applied (${plan.live.join(', ')})`);
    return 'applied';
  }

  private refuse(err: unknown): ReloadResult {
    // a start-up's message names the file already
    const message = messageOf(err);
    const error = message.startsWith(`${this.where}: `) ? message.slice(this.where.length + 2) : message;
    this.opts.metrics.reloaded('invalid');
    this.opts.log.warn({ file: this.where, error }, `${this.where}: new version refused, the last good one stays: ${error}`);
    return 'invalid';
  }

  /** Says what the plan leaves out: settings that need a restart (once per value), settings a flag or env overrides. */
  private tell(plan: ReloadPlan): void {
    for (const { name, source } of plan.overridden)
      this.opts.log.warn(
        { file: this.where, setting: name, source },
        `${this.where} changes ${name}, but ${source === 'flag' ? `--${name} on the command line` : 'the environment'} sets it and wins`,
      );
    const waiting = new Set(plan.restart.map((c) => c.name));
    for (const name of [...this.pending.keys()]) if (!waiting.has(name)) this.pending.delete(name);
    for (const c of plan.restart) {
      if (this.pending.get(c.name) === c.next) continue;
      this.pending.set(c.name, c.next);
      this.opts.log.warn(
        { file: this.where, setting: c.name, running: c.running, next: c.next },
        `${this.where} changes ${c.name} to ${JSON.stringify(c.next)}: it takes a restart (${c.why ?? 'it cannot change while the router runs'}); ${JSON.stringify(c.running)} stays until then`,
      );
    }
  }
}

/**
 * A worker of --workers: runs the versions its primary applies, in order, from the one in force when it starts. Its
 * own start-up settings are the base: the live settings of each version replace theirs.
 */
export class ConfigFollower {
  private running: FlagState;
  private seq = -1;

  constructor(
    settings: RouterSettings,
    private readonly link: WorkerLink,
    private readonly opts: { env: Env; kvEvents: boolean; log: Logger; apply: (change: ConfigChange) => void },
  ) {
    this.running = settings;
  }

  /** Takes each version the primary sends, and asks it for the one in force now. */
  start(): void {
    this.link.onRelay(CONFIG_TOPICS.version, (value) => this.take(value));
    this.link.ask(CONFIG_TOPICS.current, 10_000).then(
      (value) => this.take(value),
      (err: unknown) => this.opts.log.warn({ error: messageOf(err) }, 'could not ask the primary for the configuration in force'),
    );
  }

  /** A version from the primary; an older one than this worker runs is ignored. */
  take(value: unknown): void {
    const version = parseConfigVersion(value);
    if (version === undefined || version.seq <= this.seq) return;
    this.seq = version.seq;
    const next: FlagState = {
      values: version.values as unknown as RouterFlagValues,
      sources: new Map(Object.entries(version.sources)),
      fromFile: this.running.fromFile,
    };
    try {
      const plan = planReload(this.running, next, { kvEvents: this.opts.kvEvents });
      if (plan.live.length === 0) return;
      const config = buildRouterConfig(plan.values, explicitIn(plan.sources), this.opts.env);
      this.running = { values: plan.values, sources: plan.sources, fromFile: this.running.fromFile };
      this.opts.apply({ config, live: new Set(plan.live), version });
      this.opts.log.info({ sha256: version.sha256, changed: plan.live }, `configuration applied (${plan.live.join(', ')})`);
    } catch (err) {
      this.opts.log.error({ error: messageOf(err), sha256: version.sha256 }, "could not apply the primary's configuration");
    }
  }
}
