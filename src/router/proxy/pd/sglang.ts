// sglang: the same body, with the prefill's bootstrap address and a fresh room number, goes to the prefill and the
// decode endpoint at once; the decode endpoint joins the room and receives the KV cache from the prefill. The client
// gets the decode answer, held until the prefill has answered 2xx. A prefill that fails cancels the decode call: a
// 4xx goes back to the client as it came; one that another prefill endpoint may answer (a refused connection, a busy
// engine, an adapter it does not hold) makes the pair again with the next untried prefill endpoint (a new room);
// anything else, or no prefill endpoint left, is a 502 (SGLang's decode cannot run alone).
import { unbracketHost } from '../../util/host.js';
import { randomBytes } from 'node:crypto';
import type { ForwardResult } from '../forwarder.js';
import { bootstrapBody } from './bodies.js';
import { GatedSink } from './gated-sink.js';
import type { PdPair, PdProtocolRunner } from './protocol.js';

const ROOM_MASK = (1n << 63n) - 1n;

/** A random room in [0, 2^63): SGLang's own gateway draws a u64 and masks it to i64's range. */
export function bootstrapRoom(): bigint {
  return randomBytes(8).readBigUInt64BE() & ROOM_MASK;
}

function bootstrapHost(url: string): string {
  return unbracketHost(new URL(url).hostname);
}

export const runSglang: PdProtocolRunner = async (first) => {
  let pair: PdPair | undefined = first;
  let result: ForwardResult | undefined;
  while (pair !== undefined) {
    const run = await runPair(pair);
    result = run.result;
    // nothing reached the client and another prefill endpoint may answer: the pair is made again with it
    if (!run.elsewhere || pair.sink.destroyed) return result;
    pair = pair.otherPrefill();
  }
  return result as ForwardResult;
};

async function runPair(pair: PdPair): Promise<{ result: ForwardResult; elsewhere: boolean }> {
  const body = bootstrapBody(pair.body, bootstrapHost(pair.prefill.url), pair.bootstrapPort, bootstrapRoom());
  const gate = new GatedSink(pair.sink);
  try {
    const prefill = pair.callPrefill(body, (status) => {
      if (status >= 200 && status < 300) gate.open();
    });
    const judged = prefill.done.then((outcome) => {
      const verdict = pair.judgePrefill(outcome, false);
      if (verdict.kind !== 'ok') gate.cancel();
      return verdict;
    });
    const decoded = await pair.forwardDecode(body, undefined, gate);
    if (decoded.kind === 'unanswered') {
      // the decode side could not be reached at all: the prefill would wait for a partner that never comes
      prefill.abort();
      await judged;
      return { result: decoded, elsewhere: false };
    }
    const verdict = await judged;
    // the prefill answered 2xx and the decode answer has gone out: how the prefill's body ended changes nothing
    if (gate.isOpen || verdict.kind === 'ok') return { result: decoded, elsewhere: false };
    switch (verdict.kind) {
      case 'client-gone':
        return { result: { kind: 'client-gone', endpoint: pair.prefill }, elsewhere: false };
      case 'refused':
        return { result: pair.passBack(verdict), elsewhere: false };
      case 'failed':
        return {
          result: { kind: 'unanswered', failure: 'other', detail: `prefill failed: ${verdict.detail}`, endpoint: pair.prefill },
          elsewhere: verdict.elsewhere === true,
        };
    }
  } finally {
    gate.release();
  }
}
