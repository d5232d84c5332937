// Mid-stream migration (--migration-limit N): a streamed chat or text completion whose engine fails after the client
// has part of the answer (a reset, a broken or truncated chunk, an idle time-out, an engine's 5xx error event) goes on
// on another ready endpoint of the model, picked by the routing policy without the failed ones, with what the client
// already has (./continuation.ts); the client sees one stream (./relay.ts). When it must not or cannot go on (a case
// of ./continuation.ts, the limit reached, no endpoint left) the stream ends with the router's error event, as without
// migration.
import type { Endpoint } from '../../core/endpoint.js';
import type { ResponseSink } from '../../core/exchange.js';
import type { FailureKind, MigrationObserver, MigrationOutcome } from '../../core/forward.js';
import type { TraceSpan } from '../../core/trace.js';
import { ENDPOINT, EVENT, FAILURE, MIGRATION_NUMBER, MIGRATION_REASON, MIGRATION_TOKENS, OUTCOME } from '../../tracing/attributes.js';
import type { ForwardResult } from '../forwarder.js';
import { streamErrorEvent } from '../sse-events.js';
import { totalDeadline } from '../total-deadline.js';
import { continuationBody, migrationApiOf, requestRefusal, sentRefusal, type MigrationApi } from './continuation.js';
import { StreamRelay } from './relay.js';

export interface MigrationConfig {
  /** --migration-limit: migrations per request at most (0: off) */
  readonly limit: number;
  /** --total-timeout in ms (0: none): one deadline for every engine the request goes to */
  readonly totalMs: number;
  /** chat streams may be continued: the engines honour continue_final_message (vLLM, SGLang; not TGI) */
  readonly chat: boolean;
}

/** What the access log says of a request's migrations. */
export interface MigrationNote {
  /** continuations sent */
  migrations: number;
  /** why a broken stream was not continued (a refusal's reason, `limit`, `no-endpoint`) */
  notMigrated?: string;
}

/** What one engine (after the first: a continuation) is sent. */
export interface MigrationLeg {
  readonly body: Buffer;
  /** the body parsed (the routing policies read the prompt) */
  readonly parsed: Readonly<Record<string, unknown>>;
  readonly relay: StreamRelay;
  /** the endpoints whose stream broke: not picked again */
  readonly exclude: ReadonlySet<Endpoint> | undefined;
  readonly deadline: number;
}

/** One request that may migrate. */
export interface MigrationRun {
  readonly model: string;
  /** the route path (query excluded) */
  readonly path: string;
  /** the client's body, parsed */
  readonly parsed: Readonly<Record<string, unknown>>;
  /** the bytes the first engine is sent (an alias's model replaced, ...): continuations are made from them */
  readonly body: Buffer;
  /** the ready endpoints of the model now (P/D: its decode side) */
  readonly candidates: () => readonly Endpoint[];
  readonly res: ResponseSink;
  readonly note: MigrationNote;
  readonly trace: TraceSpan | undefined;
  readonly onFirstByte: (() => void) | undefined;
}

/** Forwards one leg: the first without a relay when the request is no stream that may migrate. */
export type SendLeg = (leg: MigrationLeg | undefined) => Promise<ForwardResult>;

export class Migrations {
  constructor(
    private readonly config: MigrationConfig,
    private readonly observer: MigrationObserver,
  ) {}

  /** Forwards the request, continuing its stream elsewhere when its engine fails mid-way. */
  async forward(run: MigrationRun, send: SendLeg): Promise<ForwardResult> {
    const api = migrationApiOf(run.path);
    if (api === undefined || run.parsed.stream !== true) return send(undefined);
    const refusal = requestRefusal(api, run.parsed) ?? (api === 'chat' && !this.config.chat ? 'engine-kind' : undefined);
    if (refusal === undefined) return this.migrating(run, api, send);
    // today's path: a stream broken mid-way ends with the router's error event (the attempt writes it)
    const result = await send(undefined);
    if (result.kind === 'broken') this.notMigrated(run, 'refused', refusal, result.endpoint, result.failure, 0);
    return result;
  }

  private async migrating(run: MigrationRun, api: MigrationApi, send: SendLeg): Promise<ForwardResult> {
    const relay = new StreamRelay(api);
    const deadline = totalDeadline(this.config.totalMs);
    let leg: MigrationLeg = { body: run.body, parsed: run.parsed, relay, exclude: undefined, deadline };
    const exclude = new Set<Endpoint>();
    let sent: Record<string, unknown> | undefined;
    let status = 200;
    let last: Endpoint | undefined;
    for (let migrations = 0; ; ) {
      const result = await send(leg);
      if (migrations > 0 && result.kind === 'answered') this.observer.migration(run.model, 'completed');
      if (migrations > 0 && result.kind === 'unanswered') this.observer.migration(run.model, 'failed');
      // open: the client has the stream's head and no end; the first engine's stream broke, or a continuation's did or
      // never began
      const open = (result.kind === 'broken' && relay.streaming) || (migrations > 0 && result.kind === 'unanswered');
      if (!open) return result;
      if (result.kind === 'broken') status = result.status;
      last = result.endpoint ?? last;
      if (run.res.destroyed) return { kind: 'client-gone', endpoint: last };
      if (result.endpoint !== undefined) exclude.add(result.endpoint);
      const failure = result.failure;
      sent ??= JSON.parse(run.body.toString('utf8')) as Record<string, unknown>;
      const why = this.whyNot(run, relay, sent, failure, migrations, exclude);
      if (why !== undefined) {
        this.notMigrated(run, why.outcome, why.reason, result.endpoint, failure, migrations);
        return this.end(run, relay, status, last, failure === 'no-endpoint' ? 'other' : failure);
      }
      migrations++;
      run.note.migrations = migrations;
      this.observer.migration(run.model, 'migrated');
      run.trace?.event(EVENT.migration, {
        [OUTCOME]: 'migrated',
        [ENDPOINT]: result.endpoint?.url ?? '',
        [FAILURE]: failure,
        [MIGRATION_TOKENS]: relay.tokens,
        [MIGRATION_NUMBER]: migrations,
      });
      const next = continuationBody(api, sent, relay);
      relay.continueOn();
      leg = { body: Buffer.from(JSON.stringify(next)), parsed: next, relay, exclude, deadline };
    }
  }

  /** Why the open stream is not continued, or undefined when it is. */
  private whyNot(
    run: MigrationRun,
    relay: StreamRelay,
    sent: Readonly<Record<string, unknown>>,
    failure: FailureKind | 'no-endpoint',
    migrations: number,
    exclude: ReadonlySet<Endpoint>,
  ): { outcome: MigrationOutcome; reason: string } | undefined {
    // the request's time is over: a continuation would only be cut again
    if (failure === 'total-timeout') return { outcome: 'refused', reason: 'total-timeout' };
    const refusal = relay.refusal ?? (relay.finished || relay.done ? 'finished' : undefined) ?? sentRefusal(sent, relay);
    if (refusal !== undefined) return { outcome: 'refused', reason: refusal };
    if (migrations >= this.config.limit) return { outcome: 'limit', reason: 'limit' };
    if (!run.candidates().some((c) => !exclude.has(c))) return { outcome: 'no-endpoint', reason: 'no-endpoint' };
    return undefined;
  }

  private notMigrated(
    run: MigrationRun,
    outcome: MigrationOutcome,
    reason: string,
    endpoint: Endpoint | undefined,
    failure: FailureKind | 'no-endpoint',
    migrations: number,
  ): void {
    run.note.notMigrated = reason;
    this.observer.migration(run.model, outcome);
    run.trace?.event(EVENT.migration, {
      [OUTCOME]: outcome,
      [MIGRATION_REASON]: reason,
      [ENDPOINT]: endpoint?.url ?? '',
      [FAILURE]: failure,
      [MIGRATION_NUMBER]: migrations,
    });
  }

  /** The router's error event ends the stream, as it would have without migration. */
  private end(run: MigrationRun, relay: StreamRelay, status: number, endpoint: Endpoint | undefined, failure: FailureKind): ForwardResult {
    const res = run.res;
    if (!res.destroyed) {
      run.onFirstByte?.();
      res.end(streamErrorEvent(relay, failure));
    }
    if (endpoint === undefined) return { kind: 'client-gone', endpoint };
    return { kind: 'broken', status, endpoint, failure };
  }
}
