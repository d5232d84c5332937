// The settings file as the router follows it (--config, --dynamic-config-yaml/json): each new version read, by what
// became of it, whether the last one was good, when the configuration in force was applied and which version of the
// file it came from. Registered only where a file is followed: the single process, or under --workers the primary
// (which reads the file and hands each version to its workers).
import { Counter, Gauge, type Registry } from 'prom-client';

export type ReloadResult = 'applied' | 'invalid' | 'unchanged';

export class ConfigMetrics {
  private readonly reloads: Counter<'result'>;
  private readonly successful: Gauge;
  private readonly appliedAt: Gauge;
  private readonly info: Gauge<'sha256'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.reloads = new Counter({
      name: 'llm_router_config_reloads_total',
      help: 'New versions of the settings file read while the router runs, by result: applied (a setting that changes live changed), unchanged (valid; nothing that runs changed: comments, settings a flag overrides, or only settings that wait for a restart), invalid (refused whole; the last good version stays)',
      labelNames: ['result'],
      registers,
    });
    for (const result of ['applied', 'invalid', 'unchanged']) this.reloads.inc({ result }, 0);
    this.successful = new Gauge({
      name: 'llm_router_config_last_reload_successful',
      help: '1 when the last version of the settings file read was valid (applied or unchanged), 0 when it was refused',
      aggregator: 'max',
      registers,
    });
    this.appliedAt = new Gauge({
      name: 'llm_router_config_last_reload_success_timestamp_seconds',
      help: 'When the configuration in force was read from the settings file (start-up, or the last version applied), Unix seconds',
      aggregator: 'max',
      registers,
    });
    this.info = new Gauge({
      name: 'llm_router_config_info',
      help: 'The version of the settings file the configuration in force was read from: sha256 of its text (replicas and workers following one file show one value)',
      labelNames: ['sha256'],
      aggregator: 'max',
      registers,
    });
  }

  /** The configuration in force was read from the file with this text hash (at start-up, or a version applied). */
  inForce(sha256: string, atMs: number): void {
    this.successful.set(1);
    this.appliedAt.set(atMs / 1000);
    this.info.reset();
    this.info.set({ sha256 }, 1);
  }

  /** A new version of the file was read. `sha256` of a valid one (applied or unchanged): the version now in force. */
  reloaded(result: ReloadResult, sha256?: string, atMs = Date.now()): void {
    this.reloads.inc({ result });
    if (result === 'invalid') this.successful.set(0);
    else if (result === 'applied' && sha256 !== undefined) this.inForce(sha256, atMs);
    else {
      this.successful.set(1);
      if (sha256 !== undefined) {
        this.info.reset();
        this.info.set({ sha256 }, 1);
      }
    }
  }
}
