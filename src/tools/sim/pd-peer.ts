// How simulated P/D engines meet: a prefill engine holds each prompt's KV cache for a lease (vllm-nixl: the decode
// engine pulls it from the remote_host:remote_port the prefill answer named) or waits in a room for its decode
// partner (sglang: the decode engine joins the room at the bootstrap address). Both run over the simulators' own HTTP
// ports (POST /_sim/kv/pull, POST /_sim/bootstrap/join), so a transfer succeeds only if the prefill really happened
// on that engine, for the same prompt.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { renderPrompt } from './prefix-cache.js';

/** vLLM's NIXL connector holds prefilled blocks this long for a decode engine to pull */
export const KV_LEASE_MS = 30_000;
/** a room whose partner does not come within this is given up */
export const ROOM_TIMEOUT_MS = 10_000;

/** Identifies a prompt across engines: both halves must have been sent the same one. */
export function promptHash(body: Record<string, unknown>): string {
  return createHash('sha1').update(renderPrompt(body)).digest('hex');
}

export type RoomOutcome = 'sent' | 'prefill-gone' | 'timeout' | 'other-prompt';

class Room {
  private joinedResolve: (() => void) | undefined;
  readonly joined = new Promise<void>((resolve) => (this.joinedResolve = resolve));
  private doneResolve: ((o: RoomOutcome) => void) | undefined;
  readonly done = new Promise<RoomOutcome>((resolve) => (this.doneResolve = resolve));
  prefillPrompt: string | undefined;
  decodePrompt: string | undefined;
  readonly timer: NodeJS.Timeout;

  constructor(onTimeout: () => void) {
    this.timer = setTimeout(onTimeout, ROOM_TIMEOUT_MS);
  }

  join(): void {
    this.joinedResolve?.();
  }

  finish(o: RoomOutcome): void {
    clearTimeout(this.timer);
    this.doneResolve?.(o);
  }
}

/** The prefill side: leases of prefilled prompts, and bootstrap rooms. */
export class PrefillLedger {
  private readonly leases = new Map<string, { prompt: string; expires: number }>();
  private readonly rooms = new Map<string, Room>();

  hold(requestId: string, prompt: string): void {
    const now = Date.now();
    for (const [id, lease] of this.leases) if (lease.expires < now) this.leases.delete(id);
    this.leases.set(requestId, { prompt, expires: now + KV_LEASE_MS });
  }

  /** A decode engine pulls a lease: 200 once, 404 when unknown or expired, 409 for another prompt. */
  pull(requestId: string, prompt: string): number {
    const lease = this.leases.get(requestId);
    if (!lease || lease.expires < Date.now()) return 404;
    if (lease.prompt !== prompt) return 409;
    this.leases.delete(requestId);
    return 200;
  }

  room(id: string): Room {
    let room = this.rooms.get(id);
    if (!room) {
      const created: Room = new Room(() => this.close(id, created, 'timeout'));
      room = created;
      this.rooms.set(id, room);
    }
    return room;
  }

  /** Ends every open room, as the engine stops (its process would be gone): no room's timer outlives it. */
  closeAll(): void {
    for (const [id, room] of this.rooms) this.close(id, room, 'prefill-gone');
  }

  /** Ends a room once (later calls do nothing): the decode engine waiting in it hears the outcome. */
  close(id: string, room: Room, outcome: RoomOutcome): void {
    if (this.rooms.get(id) !== room) return;
    this.rooms.delete(id);
    room.finish(outcome);
  }
}

/** kept-alive connections to the other simulators, as an engine keeps its KV side channel open */
const peers = new http.Agent({ keepAlive: true });

/** A POST of JSON to another simulator; resolves with its status and JSON answer, or status 0 when unreachable. */
export function peerPost(
  url: string,
  body: unknown,
  signal: AbortSignal,
  headers: Record<string, string> = {},
  timeoutMs = ROOM_TIMEOUT_MS + 5_000,
): Promise<{ status: number; json: unknown }> {
  const text = JSON.stringify(body);
  return new Promise((resolve) => {
    const req = http.request(url, {
      method: 'POST',
      agent: peers,
      timeout: timeoutMs,
      signal,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
    });
    req.on('response', (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (data += c));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(data);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
      res.on('error', () => resolve({ status: 0, json: undefined }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, json: undefined }));
    req.end(text);
  });
}
