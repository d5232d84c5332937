// Rendering a chat from its earlier turns' rendering (src/router/kv/chat-prefix.ts) against rendering it whole: every
// turn of a corpus of conversations, with and without the generation prompt, tools and template arguments; templates
// that are not prefix-stable are found out (at load by the probes, at run time by the checks) and rendered whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatPrefixCache, headFor, joinShape, prefixStable, probeShapes } from '../../src/router/kv/chat-prefix.js';
import { type ChatRenderOptions, HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { conversation } from '../support/conversations.js';
import { publishedTokenizer } from '../support/tokenizers.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const tok = await HfTokenizer.load(DIR);
const tokenizerJson = JSON.parse(readFileSync(path.join(DIR, 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
const config = JSON.parse(readFileSync(path.join(DIR, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;

/** The chat template of a published tokenizer, with the fixture's vocabulary. */
function loadTemplateTokenizer(name: 'qwen2_5'): HfTokenizer {
  const file = path.join(publishedTokenizer(name), 'tokenizer_config.json');
  return withTemplate(JSON.parse(readFileSync(file, 'utf8')).chat_template as string);
}

/** A tokenizer with the fixture's vocabulary and another chat template. */
function withTemplate(template: string): HfTokenizer {
  return HfTokenizer.fromObjects(tokenizerJson, config, template);
}

const TOOLS = [{ type: 'function', function: { name: 'lookup', description: 'Looks up', parameters: { type: 'object' } } }];

test('the Llama-3.1 template of the fixture is prefix-stable', () => {
  assert.equal(prefixStable(tok, tok.templateSource() as string), true);
  assert.equal(prefixStable(tok, tok.templateSource({ tools: TOOLS }) as string), true);
});

test('every turn of a corpus of conversations renders as the whole, and later turns reuse the earlier ones', () => {
  const variants: ChatRenderOptions[] = [
    {},
    { add_generation_prompt: false },
    { tools: TOOLS },
    { chat_template_kwargs: { date_string: '02 Dec 2026' } },
    { documents: [{ title: 'a', text: 'b' }] },
  ];
  for (const opts of variants) {
    // no run-time checks: what is compared here is the shortcut itself
    const cache = new ChatPrefixCache(tok, 64 * 1024 * 1024, 0, 0);
    for (let seed = 1; seed <= 6; seed++) {
      const all = conversation(seed, 8, 30);
      for (let n = 1; n <= all.length; n++) {
        const messages = all.slice(0, n);
        const both = [cache, tok].map((r) => {
          try {
            return r.renderChat(messages, opts);
          } catch (err) {
            return `threw ${(err as Error).message}`;
          }
        });
        assert.equal(both[0], both[1], `${JSON.stringify(opts)} seed ${seed}, ${n} messages`);
      }
      // the same conversation again, whole: every message remembered
      assert.equal(cache.renderChat(all, opts), tok.renderChat(all, opts));
    }
    const s = cache.stats;
    assert.ok(s.incremental >= s.whole * 3, `${JSON.stringify(opts)}: ${JSON.stringify(s)}`);
    assert.ok(s.reusedMessages > 500, JSON.stringify(s));
    assert.equal(s.mismatches, 0);
  }
});

test('continue_final_message, a single message and a template error are rendered whole (and throw as whole)', () => {
  const cache = new ChatPrefixCache(tok, 1024 * 1024, 0, 0);
  const all = conversation(9, 4, 20);
  cache.renderChat(all.slice(0, -1));
  const opts = { add_generation_prompt: false, continue_final_message: true };
  assert.equal(cache.renderChat(all, opts), tok.renderChat(all, opts));
  assert.equal(cache.renderChat(all.slice(0, 1)), tok.renderChat(all.slice(0, 1)));
  assert.throws(() => cache.renderChat(all, { add_generation_prompt: true, continue_final_message: true }), /both/);
  assert.equal(cache.stats.incremental, 0);
});

test('the head keeps the system message, the first message after it, and the parity of the tail', () => {
  const sys = [{ role: 'system' }, { role: 'user' }, { role: 'assistant' }, { role: 'user' }, { role: 'assistant' }, { role: 'user' }];
  // M[k] keeps the parity of its index: a head of 2 before an even k, of 3 before an odd one; none that reaches k
  assert.equal(headFor(sys, 2), undefined);
  assert.equal(headFor(sys, 3), undefined);
  assert.equal(headFor(sys, 4), 2);
  assert.equal(headFor(sys, 5), 3);
  assert.equal(headFor(sys, 6), 2);
  const none = sys.slice(1);
  assert.equal(headFor(none, 2), undefined);
  assert.equal(headFor(none, 3), 1);
  assert.equal(headFor(none, 4), 2);
});

// Qwen3's way: an assistant message before the last user question loses its reasoning, so an earlier turn's rendering
// is not a prefix of the next turn's.
const REASONING = `{%- set ns = namespace(last=-1) %}
{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}
{%- for m in messages %}
{%- if m.role == 'assistant' and loop.index0 < ns.last and '</think>' in m.content %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' + m.content.split('</think>')[-1] + '<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (m.content if m.content is string else '') + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

// one that counts the messages in its first line
const COUNTING = `{{- bos_token + 'messages: ' + (messages | length) | string + '\\n' }}
{%- for m in messages %}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (m.content if m.content is string else '') + '<|eot_id|>' }}{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

test('templates that are not prefix-stable are found out by the probes: the shapes that fail are rendered whole, all of them for one that counts', () => {
  const all = [
    { role: 'user', content: 'q1' },
    { role: 'assistant', content: '<think>r1</think>a1' },
    { role: 'user', content: 'q2' },
    { role: 'assistant', content: '<think>r2</think>a2' },
    { role: 'user', content: 'q3' },
  ];
  // the count in the first line changes at every split: no shape passes, the template is always rendered whole
  const counting = withTemplate(COUNTING);
  assert.equal(prefixStable(counting, COUNTING), false);
  assert.equal(probeShapes(counting, COUNTING).usable, false);
  const whole = new ChatPrefixCache(counting, 1024 * 1024, 0, 0);
  for (let n = 1; n <= all.length; n++) assert.equal(whole.renderChat(all.slice(0, n)), counting.renderChat(all.slice(0, n)));
  assert.equal(whole.stats.incremental, 0);
  // reasoning dropped before the last question: a cut after an assistant's answer fails (its reasoning goes once a
  // question follows), a cut after a question does not
  const reasoning = withTemplate(REASONING);
  assert.equal(prefixStable(reasoning, REASONING), false);
  const probed = probeShapes(reasoning, REASONING);
  assert.equal(probed.usable, true);
  assert.ok(probed.unstable.has('assistant>user') && !probed.unstable.has('user>assistant'), [...probed.unstable].join(' '));
  // no run-time checks: the probes alone keep every render exact
  const cache = new ChatPrefixCache(reasoning, 1024 * 1024, 0, 0);
  for (let n = 1; n <= all.length; n++) assert.equal(cache.renderChat(all.slice(0, n)), reasoning.renderChat(all.slice(0, n)));
  assert.equal(cache.stats.incremental, 1, JSON.stringify(cache.stats));
});

// prefix-stable on every probe, not on a message that mentions "later": the run-time checks catch that
const SNEAKY = `{%- for m in messages %}
{%- if loop.index0 > 0 and 'later' in (messages[loop.index0 - 1].content or '') and not loop.last %}{{- '[seen]' }}{%- endif %}
{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (m.content if m.content is string else '') + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

test('a template that passes the probes but not a real conversation: the run-time check turns off that shape only', () => {
  const t = withTemplate(SNEAKY);
  assert.equal(prefixStable(t, SNEAKY), true);
  const all = [
    { role: 'system', content: 's' },
    { role: 'user', content: 'q1' },
    { role: 'assistant', content: 'a1' },
    { role: 'user', content: 'more later' },
    { role: 'assistant', content: 'a2' },
    { role: 'user', content: 'q3' },
  ];
  const render = (cache: ChatPrefixCache): string[] => [4, 6].map((n) => cache.renderChat(all.slice(0, n)));
  // without checks the shortcut is wrong here (which is what the checks are for)
  const unchecked = new ChatPrefixCache(t, 1024 * 1024, 0, 0);
  assert.notEqual(render(unchecked)[1], t.renderChat(all));
  const checked = new ChatPrefixCache(t, 1024 * 1024, 64, 4);
  assert.deepEqual(render(checked), [t.renderChat(all.slice(0, 4)), t.renderChat(all)]);
  assert.equal(checked.stats.mismatches, 1);
  // the 6-message chat was cut after 'more later' (user>assistant): that shape is rendered whole from now on, for
  // this conversation and any other
  assert.equal(joinShape(all, 4), 'user>assistant');
  const next = [...all, { role: 'assistant', content: 'a3' }, { role: 'user', content: 'q4' }];
  assert.equal(checked.renderChat(next), t.renderChat(next));
  assert.equal(checked.stats.incremental, 0);
  // another client's conversation: its turns cut after an answer (assistant>user) reuse again once their first uses
  // were checked; those cut after a question are whole; every one exact
  const other = conversation(3, 16, 20);
  const byShape = new Map<string, { renders: number; incremental: number }>();
  for (let n = 2; n <= other.length; n++) {
    const messages = other.slice(0, n);
    const before = checked.stats.incremental;
    assert.equal(checked.renderChat(messages), t.renderChat(messages));
    // each render finds the one before remembered: it is cut before its last message
    const s = byShape.get(joinShape(messages, n - 1)) ?? { renders: 0, incremental: 0 };
    s.renders++;
    s.incremental += checked.stats.incremental - before;
    byShape.set(joinShape(messages, n - 1), s);
  }
  const answered = byShape.get('assistant>user');
  assert.ok(answered && answered.renders >= 10 && answered.incremental >= answered.renders - 5, JSON.stringify([...byShape]));
  assert.equal(byShape.get('user>assistant')?.incremental, 0);
  assert.equal(checked.stats.mismatches, 1);
});

test("Qwen2.5's published template: runs of tool results are cut only where it allows, every turn exact", () => {
  const qwen = loadTemplateTokenizer('qwen2_5');
  const probed = probeShapes(qwen, qwen.templateSource() as string);
  assert.equal(probed.usable, true);
  assert.deepEqual([...probed.unstable], ['tool>tool']);
  const call = (id: string, city: string) => ({
    id,
    type: 'function',
    function: { name: 'get_weather', arguments: JSON.stringify({ city }) },
  });
  const all = [
    { role: 'system', content: 'You answer with tools.' },
    { role: 'user', content: 'Weather in Paris and Rome?' },
    { role: 'assistant', content: null, tool_calls: [call('a', 'Paris'), call('b', 'Rome')] },
    { role: 'tool', tool_call_id: 'a', content: '20' },
    { role: 'tool', tool_call_id: 'b', content: '25' },
    { role: 'assistant', content: 'Paris 20, Rome 25.' },
    { role: 'user', content: 'And Oslo?' },
    { role: 'assistant', content: null, tool_calls: [call('c', 'Oslo')] },
    { role: 'tool', tool_call_id: 'c', content: '3' },
    { role: 'assistant', content: 'Cold.' },
    { role: 'user', content: 'Thanks' },
  ];
  for (const tools of [null, TOOLS]) {
    // no run-time checks: the probes alone keep it exact; every prefix, so the cut falls everywhere once
    const cache = new ChatPrefixCache(qwen, 16 * 1024 * 1024, 0, 0);
    for (let n = 2; n <= all.length; n++) {
      const messages = all.slice(0, n);
      assert.equal(cache.renderChat(messages, { tools }), qwen.renderChat(messages, { tools }), `${n} messages`);
    }
    // the case of the issue: the earlier turn ended on the first of two tool results
    const fresh = new ChatPrefixCache(qwen, 16 * 1024 * 1024, 0, 0);
    fresh.renderChat(all.slice(0, 4), { tools });
    assert.equal(fresh.renderChat(all, { tools }), qwen.renderChat(all, { tools }));
    assert.ok(cache.stats.incremental >= 6, JSON.stringify(cache.stats));
  }
});

test("a request's own template is rendered whole: no probes, nothing remembered; the tokenizer's own text sent as one is not", () => {
  const t = withTemplate(tok.templateSource() as string);
  let renders = 0;
  const render = t.renderChat.bind(t);
  t.renderChat = (messages, opts) => {
    renders++;
    return render(messages, opts);
  };
  const cache = new ChatPrefixCache(t, 1024 * 1024, 0, 0);
  const all = conversation(5, 6, 20);
  const own = `{%- for m in messages %}{{- m.role + ': ' + m.content + '\n' }}{%- endfor %}`;
  for (let n = 2; n <= all.length; n++)
    assert.equal(cache.renderChat(all.slice(0, n), { chat_template: own }), render(all.slice(0, n), { chat_template: own }));
  assert.equal(renders, all.length - 1, 'one render a request');
  assert.equal(cache.stats.incremental, 0);
  // the tokenizer's own template, sent as the request's: probed once, then reused
  const same = tok.templateSource() as string;
  for (let n = 2; n <= all.length; n++)
    assert.equal(cache.renderChat(all.slice(0, n), { chat_template: same }), render(all.slice(0, n), { chat_template: same }));
  assert.ok(cache.stats.incremental > 0);
});

test('the remembered renderings stay within their bytes', () => {
  const cache = new ChatPrefixCache(tok, 256 * 1024, 0, 0);
  for (let seed = 1; seed <= 40; seed++) {
    const all = conversation(seed, 6, 60);
    for (let n = 2; n <= all.length; n += 2) assert.equal(cache.renderChat(all.slice(0, n)), tok.renderChat(all.slice(0, n)));
  }
  assert.ok(cache.bytes <= 256 * 1024, `${cache.bytes}`);
});
