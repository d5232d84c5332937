// "The client left": one signal per request, made once at admission from the sink its answer is written to. Every
// stage that waits (the discovery-sync wait, the hold queue, an adapter load, a P/D prefill call, the engine attempt)
// subscribes to it instead of listening to the sink's 'close' itself, so a client that left while no stage was
// listening (between two stages, or before the attempt attached its listener) is still seen by the next one: a
// subscriber to a signal that has fired already is called at once.
import type { ResponseSink } from './exchange.js';

export class ClientGone {
  private fired = false;
  /** the subscribers now; usually one (the stage under way), so no array until a second one comes */
  private first: (() => void) | undefined = undefined;
  private more: (() => void)[] | undefined = undefined;
  private readonly onClose = (): void => {
    // a sink that finished its answer says 'close' too: that is no departure
    if (!this.sink.writableFinished) this.fire();
  };

  constructor(private readonly sink: ResponseSink) {
    // a sink closed before the request got here (the client left during admission or while its body was read)
    if (sink.destroyed && !sink.writableFinished) this.fired = true;
    else sink.on('close', this.onClose);
  }

  /** the client has left (or the answer was given up: a cancelled P/D decode) */
  get gone(): boolean {
    return this.fired;
  }

  /** Calls `fn` once when the client leaves; at once (synchronously) when it has left already. */
  on(fn: () => void): void {
    if (this.fired) {
      fn();
      return;
    }
    if (this.first === undefined) this.first = fn;
    else if (this.more === undefined) this.more = [fn];
    else this.more.push(fn);
  }

  off(fn: () => void): void {
    if (this.first === fn) {
      this.first = this.more?.shift();
      return;
    }
    const more = this.more;
    if (more === undefined) return;
    const i = more.indexOf(fn);
    if (i >= 0) more.splice(i, 1);
  }

  /** Resolves 'gone' when the client leaves; `cancel` stops listening (call it when the race is over). */
  race(): { readonly gone: Promise<'gone'>; cancel(): void } {
    let leave: () => void = () => undefined;
    const gone = new Promise<'gone'>((resolve) => {
      leave = () => resolve('gone');
    });
    this.on(leave);
    return { gone, cancel: () => this.off(leave) };
  }

  /** The client left: every subscriber is called once, in the order they subscribed. */
  fire(): void {
    if (this.fired) return;
    this.fired = true;
    this.sink.off('close', this.onClose);
    const first = this.first;
    const more = this.more;
    this.first = undefined;
    this.more = undefined;
    first?.();
    if (more) for (const fn of more) fn();
  }
}
