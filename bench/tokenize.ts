// What tokenizing a request costs the router, for a conversation of about 12k tokens re-sent every turn:
//  - path mode (the test tokenizer in process): a first turn (nothing cached), a next turn (the earlier turns
//    cached), and for comparison rendering alone and a whole tokenization with no cache;
//  - engine mode against the simulator on loopback (`llm-router sim`, its /tokenize): a turn not seen before (one
//    call) and a request seen before (the cache).
//   node --import tsx bench/tokenize.ts [--samples N] [--tokenizer DIR]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { HfTokenizer } from '../src/router/kv/hf-tokenizer.js';
import { createHash } from 'node:crypto';
import { request } from 'undici';
import { promptFields, RequestTokenizer, tokensOfAnswer } from '../src/router/kv/request-tokens.js';
import { type ChatMessageLike, conversation } from '../test/support/conversations.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const SAMPLES = Number(arg('--samples') ?? 200);
const DIR = path.resolve(arg('--tokenizer') ?? path.join(ROOT, 'test/fixtures/tokenizer'));
const TARGET_TOKENS = 12_000;
const MODEL = 'sim-model';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}
const fmt = (xs: number[]): string => {
  const c = cpu.get(xs);
  const cpuText = c ? `; cpu p50 ${pct(c, 50).toFixed(3)} ms  p99 ${pct(c, 99).toFixed(3)} ms` : '';
  return `wall p50 ${pct(xs, 50).toFixed(3)} ms  p99 ${pct(xs, 99).toFixed(3)} ms${cpuText}  (n=${xs.length})`;
};

const hf = await HfTokenizer.load(DIR);
const tokensOf = (messages: readonly ChatMessageLike[]): number => hf.encode(hf.renderChat(messages), false).length;

// turns of ~250 words a message until the conversation reaches the target size
let turns = 1;
while (tokensOf(conversation(1, turns, 250)) < TARGET_TOKENS) turns++;
/** The messages up to and including user turn `t` (0-based) of conversation `seed`. */
function upToTurn(seed: number, t: number): ChatMessageLike[] {
  const all = conversation(seed, turns, 250);
  let users = -1;
  for (let i = 0; i < all.length; i++) if (all[i]?.role === 'user' && ++users === t) return all.slice(0, i + 1);
  return all;
}
const sample = upToTurn(1, turns - 1);
console.log(
  `conversation: ${turns} turns, ${sample.length} messages, ${hf.renderChat(sample).length} chars, ${tokensOf(sample)} tokens; tokenizer ${DIR}`,
);

/** CPU time of each call (the process's, user + system), beside the wall time: this machine is shared and busy. */
const cpu = new Map<number[], number[]>();
async function timeIt(fn: () => Promise<unknown> | unknown): Promise<number> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  lastCpu = (c.user + c.system) / 1000;
  return wall;
}
let lastCpu = 0;
/** Pushes a wall time and keeps the CPU time of the same call. */
function record(xs: number[], wall: number): void {
  xs.push(wall);
  const list = cpu.get(xs) ?? [];
  list.push(lastCpu);
  cpu.set(xs, list);
}

// ---- path mode
{
  const render: number[] = [];
  const whole: number[] = [];
  for (let i = 0; i < Math.min(SAMPLES, 50); i++) {
    const messages = upToTurn(1000 + i, turns - 1);
    record(render, await timeIt(() => hf.renderChat(messages)));
    const text = hf.renderChat(messages);
    record(whole, await timeIt(() => hf.encode(text, false)));
  }
  console.log(`path: render only               ${fmt(render)}`);
  console.log(`path: whole encode, no cache    ${fmt(whole)}`);

  // one phase at a time over all conversations, as turns of many conversations interleave in a router: the garbage
  // of one cold turn is collected along the way, not inside the next measured call
  const rt = new RequestTokenizer({ mode: DIR });
  await rt.preload(DIR);
  const first: number[] = [];
  const next: number[] = [];
  const tailChars: number[] = [];
  const short: number[] = [];
  let reusedAll = true;
  const seeds = Array.from({ length: SAMPLES }, (_, i) => 2000 + i);
  for (const seed of seeds) {
    const before = upToTurn(seed, turns - 2);
    record(first, await timeIt(() => rt.tokenize(MODEL, { model: MODEL, messages: before })));
  }
  for (const seed of seeds) {
    const now = upToTurn(seed, turns - 1);
    let cached = false;
    record(
      next,
      await timeIt(async () => {
        const o = await rt.tokenize(MODEL, { model: MODEL, messages: now });
        cached = o.tokens !== undefined && o.cached;
      }),
    );
    reusedAll &&= cached;
    tailChars.push((await rt.localStats(DIR))?.encoder.last.encodedChars ?? 0);
  }
  // then a short exchange (a one-line answer and question) on top of each conversation
  for (const seed of seeds) {
    const later = [
      ...upToTurn(seed, turns - 1),
      { role: 'assistant', content: 'Sure, here is the short answer you asked for.' },
      { role: 'user', content: 'Thanks! And what about tomorrow in Berlin?' },
    ];
    record(short, await timeIt(() => rt.tokenize(MODEL, { model: MODEL, messages: later })));
  }
  const stats = await rt.localStats(DIR);
  const enc = stats?.encoder;
  console.log(`path: first turn (cold)         ${fmt(first)}`);
  console.log(`path: next turn (earlier cached) ${fmt(next)}  every next turn reused: ${reusedAll}`);
  console.log(`path: next turn's new tail (tokenized now) p50 ${pct(tailChars, 50)} chars of ${hf.renderChat(sample).length}`);
  console.log(`path: next turn, short exchange  ${fmt(short)}`);
  console.log(`path: cache ${((enc?.cacheBytes ?? 0) / 1024 / 1024).toFixed(1)} MiB in ${enc?.cacheEntries} pieces`);
  const chats = stats?.chats;
  console.log(`path: rendered chats ${((chats?.bytes ?? 0) / 1024 / 1024).toFixed(1)} MiB; renders ${JSON.stringify(chats ?? {})}`);
  await rt.close();
}

// ---- engine mode against the simulator
{
  const sim = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'sim', '--host', '127.0.0.1', '--port', '0'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    let out = '';
    sim.stdout.setEncoding('utf8');
    const url = await new Promise<string>((resolve, reject) => {
      sim.stdout.on('data', (c: string) => {
        out += c;
        const m = /sim listening on (\S+)\n/.exec(out);
        if (m) resolve(m[1] as string);
      });
      sim.once('exit', () => reject(new Error(`sim exited: ${out}`)));
    });
    const rt = new RequestTokenizer({ mode: 'engine', timeoutMs: 5_000 });
    const target = { url };
    // warm the connection
    for (let i = 0; i < 20; i++) await rt.tokenize(MODEL, { model: MODEL, messages: upToTurn(1, 1) }, target);
    const miss: number[] = [];
    const hit: number[] = [];
    let fallbacks = 0;
    for (let i = 0; i < SAMPLES; i++) {
      const body = { model: MODEL, messages: upToTurn(3000 + i, turns - 1) };
      record(
        miss,
        await timeIt(async () => {
          if ((await rt.tokenize(MODEL, body, target)).tokens === undefined) fallbacks++;
        }),
      );
      record(hit, await timeIt(() => rt.tokenize(MODEL, body, target)));
    }
    // the two shares of a new turn: the router's own work around the call (prompt fields, the JSON sent, the cache
    // key, the answer parsed), and the call itself (the engine tokenizing the whole chat, plus loopback HTTP)
    const own: number[] = [];
    const call: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const body = { model: MODEL, messages: upToTurn(3000 + i, turns - 1) };
      const payload = JSON.stringify({ model: MODEL, ...(promptFields(body) as { fields: Record<string, unknown> }).fields });
      let answer = '';
      record(
        call,
        await timeIt(async () => {
          const res = await request(`${url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
          answer = await res.body.text();
        }),
      );
      record(
        own,
        await timeIt(() => {
          const p = promptFields(body) as { fields: Record<string, unknown> };
          const sent = JSON.stringify({ model: MODEL, ...p.fields });
          createHash('sha256').update(sent).digest('base64');
          tokensOfAnswer(answer);
        }),
      );
    }
    console.log(`engine: new turn (one /tokenize) ${fmt(miss)}  fallbacks ${fallbacks}`);
    console.log(`engine:   of which the router's own work ${fmt(own)}`);
    console.log(`engine:   of which the /tokenize call (engine + loopback) ${fmt(call)}`);
    console.log(`engine: same request again (cache) ${fmt(hit)}`);
    await rt.close();
  } finally {
    sim.kill('SIGTERM');
    await once(sim, 'exit');
  }
}
