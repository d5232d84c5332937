// The router's tokenizer worker thread (started by in-process.ts): the tokenizer directories and their caches live
// here (local-tokenizers.ts), so that rendering a chat template and tokenizing a long prompt never hold up the router's
// event loop. Jobs interleave: between slices of one long prompt (sliceChars) the worker takes the next message, so a
// short prompt does not wait for a long one. Each job checks its deadline when it starts and at every pause, and falls
// back with `timeout` past it; a step that cannot pause (one template render, one run of text without a special token)
// is what the event loop watches through BUSY_SINCE, and ends by terminating this thread.
import { parentPort, workerData } from 'node:worker_threads';
import { DeadlinePassed, type LocalJob, LocalTokenizers, tokenizeLoaded } from './local-tokenizers.js';
import type { TokenizeOutcome } from './prompt-fields.js';
import { ABANDON_BEFORE, BUSY_SINCE, clock, type FromWorker, type ToWorker, type WorkerSetup } from './worker-protocol.js';

const setup = workerData as WorkerSetup;
const shared = new Float64Array(setup.shared);
const local = new LocalTokenizers(setup.cacheBytes);
const port = parentPort;

function send(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  port?.postMessage(message, transfer);
}

/** A step of a job begins: the event loop sees since when. */
function enter(): void {
  shared[BUSY_SINCE] = clock();
}

function leave(): void {
  shared[BUSY_SINCE] = 0;
}

function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

async function run(m: Extract<ToWorker, { type: 'job' }>): Promise<void> {
  let outcome: TokenizeOutcome = { fallback: 'timeout' };
  const late = (): boolean => clock() > m.deadline || m.sentAt < (shared[ABANDON_BEFORE] as number);
  if (!late()) {
    const t = await local.load(m.dir);
    if (!t) outcome = { fallback: 'tokenizer-error' };
    else if (!late()) {
      const job: LocalJob = {
        maxChars: m.maxChars,
        sliceChars: setup.sliceChars,
        pause: async () => {
          leave();
          await nextTurn();
          if (late()) throw new DeadlinePassed();
          enter();
        },
      };
      enter();
      try {
        outcome = await tokenizeLoaded(t, m.prompt, job);
      } finally {
        leave();
      }
    }
  }
  send({ type: 'done', id: m.id, outcome }, outcome.tokens ? [outcome.tokens.buffer as ArrayBuffer] : []);
}

port?.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'load':
      void local.load(m.dir).then((t) => send({ type: 'loaded', dir: m.dir, ok: t !== undefined }));
      break;
    case 'job':
      void run(m);
      break;
    case 'stats':
      void local.stats(m.dir).then((stats) => send({ type: 'stats', id: m.id, stats }));
      break;
  }
});
