// The client's response as the decode call of an sglang pair sees it: what decode writes is held until the prefill
// has answered 2xx (then written out in order, and everything after it passes straight through), or thrown away when
// the pair is given up. Giving up looks like a client that left, so the decode call is aborted the usual way.
import { EventEmitter } from 'node:events';
import type { ResponseSink } from '../../core/exchange.js';

type Gate = 'held' | 'open' | 'cancelled';

export class GatedSink extends EventEmitter implements ResponseSink {
  private gate: Gate = 'held';
  private held: Array<() => void> = [];
  private heldStatus = 200;
  private wroteHead = false;
  private readonly onClose = (): void => {
    this.emit('close');
  };
  private readonly onDrain = (): void => {
    this.emit('drain');
  };

  constructor(private readonly res: ResponseSink) {
    super();
    res.on('close', this.onClose);
    res.on('drain', this.onDrain);
  }

  get statusCode(): number {
    return this.gate === 'open' ? this.res.statusCode : this.heldStatus;
  }

  set statusCode(code: number) {
    if (this.gate === 'open') this.res.statusCode = code;
    else this.heldStatus = code;
  }

  get headersSent(): boolean {
    return this.gate === 'open' ? this.res.headersSent : this.wroteHead;
  }

  get destroyed(): boolean {
    return this.gate === 'cancelled' || this.res.destroyed;
  }

  get writableFinished(): boolean {
    return this.gate === 'open' && this.res.writableFinished;
  }

  get isOpen(): boolean {
    return this.gate === 'open';
  }

  /** Writes what was held and lets the rest through. */
  open(): void {
    if (this.gate !== 'held') return;
    this.gate = 'open';
    this.res.statusCode = this.heldStatus;
    const held = this.held;
    this.held = [];
    for (const op of held) op();
  }

  /** Drops what was held and aborts the decode call (it sees its client leave). */
  cancel(): void {
    if (this.gate !== 'held') return;
    this.gate = 'cancelled';
    this.held = [];
    this.emit('close');
  }

  /** Stops listening to the client's response. */
  release(): void {
    this.res.off('close', this.onClose);
    this.res.off('drain', this.onDrain);
  }

  private run(op: () => void): void {
    if (this.gate === 'open') op();
    else if (this.gate === 'held') this.held.push(op);
  }

  setHeader(name: string, value: string | number): this {
    this.run(() => this.res.setHeader(name, value));
    return this;
  }

  writeHead(statusCode: number, headers: string[]): this {
    this.wroteHead = true;
    this.heldStatus = statusCode;
    this.run(() => this.res.writeHead(statusCode, headers));
    return this;
  }

  flushHeaders(): void {
    this.run(() => this.res.flushHeaders());
  }

  write(chunk: Buffer | string): boolean {
    if (this.gate === 'open') return this.res.write(chunk);
    this.run(() => this.res.write(chunk));
    return true;
  }

  end(chunk?: Buffer | string): this {
    this.run(() => (chunk === undefined ? this.res.end() : this.res.end(chunk)));
    return this;
  }

  destroy(): this {
    this.run(() => this.res.destroy());
    return this;
  }
}
