// Writing an answer to the client with back-pressure (src/router/proxy/attempt.ts): when the client's socket says to
// wait, the engine's answer is paused (the engine client stops reading) until the client drains. Also the moment the
// first body byte goes out (time to first byte).
import type { ResponseSink } from '../core/exchange.js';

/** The part of an attempt that writes to the client; AttemptHandler extends it (one object per attempt). */
export abstract class ClientWriter {
  /** res.write() said to wait; the engine client's resume is called on 'drain' */
  protected paused = false;
  protected resumeFn: (() => void) | undefined = undefined;
  private drainListening = false;
  protected firstByte = false;
  private readonly onDrain = (): void => {
    this.paused = false;
    this.resumeFn?.();
  };

  constructor(
    protected readonly res: ResponseSink,
    /** called once, when the first byte of the answer's body is handed to the client */
    private readonly onFirstByte: (() => void) | undefined,
  ) {}

  /** the first body byte is about to go to the client */
  protected firstBodyByte(): void {
    this.firstByte = true;
    this.onFirstByte?.();
  }

  /** Writes a chunk; false when the engine's answer must pause until the client drains. */
  protected write(chunk: Buffer): boolean {
    if (!this.firstByte && chunk.length > 0) this.firstBodyByte();
    if (!this.res.write(chunk)) {
      this.paused = true;
      if (!this.drainListening) {
        this.drainListening = true;
        this.res.on('drain', this.onDrain);
      }
    }
    return !this.paused;
  }

  /** The attempt is over: no more resuming on 'drain'. */
  protected stopDraining(): void {
    if (this.drainListening) this.res.off('drain', this.onDrain);
  }
}
