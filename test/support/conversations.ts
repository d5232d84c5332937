// Deterministic multi-turn chat conversations for tokenizer tests and the tokenize benchmark: mixed prose, code,
// numbers, odd whitespace, non-Latin text, list-of-parts contents, tool calls and results, and now and then a
// special token's text inside a message.

const WORDS = (
  'the router sends each request to engine whose cache already holds leading blocks conversation is again every turn ' +
  'with earlier message so that answered last still most of prompt in its key value routing next there saves prefill ' +
  'thousands tokens tokenizer turns text into ids chat template messages Hello world How are you today fine thank ' +
  'weather Paris London Berlin function returns sum two numbers explain plain English quick brown fox jumps over lazy dog ' +
  "it's we're they've I'm you'll he'd naïve café 東京 Москва 🙂 = + - * / ( ) { } [ ] ; : , . ! ? 0 1 7 42 100 1234 2026 3.14"
).split(' ');

export interface ChatMessageLike {
  readonly role: string;
  readonly content: unknown;
  readonly tool_calls?: readonly unknown[];
  readonly tool_call_id?: string;
}

/** A small PRNG (mulberry32): the same seed, the same conversation. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sentence(r: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    out.push(WORDS[Math.floor(r() * WORDS.length)] as string);
    const x = r();
    if (x < 0.04) out.push('\n');
    else if (x < 0.06) out.push('\n\n');
    else if (x < 0.07) out.push('  ');
  }
  return out.join(' ');
}

/** The content of one message: mostly a string, sometimes a list of text parts, sometimes padded with whitespace. */
function content(r: () => number, words: number): unknown {
  const x = r();
  if (x < 0.1)
    return [
      { type: 'text', text: sentence(r, words >> 1) },
      { type: 'text', text: sentence(r, words >> 1) },
    ];
  if (x < 0.15) return `  ${sentence(r, words)}\n `;
  if (x < 0.17) return `${sentence(r, words >> 1)} <|eot_id|> ${sentence(r, words >> 1)}`;
  return sentence(r, words);
}

/** A conversation of `turns` user/assistant pairs after a system message; about `wordsPerMessage` words a message. */
export function conversation(seed: number, turns: number, wordsPerMessage = 40): ChatMessageLike[] {
  const r = rng(seed);
  const messages: ChatMessageLike[] = [{ role: 'system', content: `You are assistant ${seed}. ${sentence(r, 20)}` }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: content(r, Math.max(1, Math.floor(wordsPerMessage * (0.5 + r())))) });
    if (r() < 0.1) {
      const id = `call_${seed}_${t}`;
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Paris', day: t }) } }],
      });
      messages.push({ role: 'tool', tool_call_id: id, content: JSON.stringify({ temperature: 20 + t, unit: 'C' }) });
    }
    messages.push({ role: 'assistant', content: content(r, Math.max(1, Math.floor(wordsPerMessage * (0.5 + r())))) });
  }
  return messages;
}
