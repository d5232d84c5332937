// The in-process Hugging Face tokenizer (src/router/kv/hf-tokenizer.ts) on the generated Llama-3-shaped fixture:
// ids with and without the special tokens vLLM adds, the chat template rendered as vLLM renders it (expected strings
// were checked against Python's jinja2 with transformers' settings), template arguments, and what it refuses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import fc from 'fast-check';
import { ChatTemplateError, contentFormat, HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { conversation } from '../support/conversations.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const tokenizerJson = JSON.parse(readFileSync(path.join(DIR, 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
const config = JSON.parse(readFileSync(path.join(DIR, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
const vocab = (tokenizerJson.model as { vocab: Record<string, number> }).vocab;
const specials = new Map((tokenizerJson.added_tokens as { content: string; id: number }[]).map((t) => [t.content, t.id]));
const BOS = specials.get('<|begin_of_text|>') as number;
const EOT = specials.get('<|eot_id|>') as number;

const tok = await HfTokenizer.load(DIR);

test('the fixture is a real byte-level BPE: merges make multi-byte tokens, words split into several tokens, text round-trips', () => {
  const ids = tok.encode('Hello world! The router sends tokens to engines.', false);
  // merged tokens (ids past the 256 byte tokens) and more than one token for some word
  assert.ok(ids.some((id) => id >= 256 && id < BOS));
  assert.ok(ids.length > 'Hello world! The router sends tokens to engines.'.split(' ').length);
  assert.equal(tok.encode(' the', false).length, 1, "' the' is one merged token");
  assert.equal(tok.encode(' the', false)[0], vocab['Ġthe']);
  assert.ok(tok.encode('zebra', false).length > 1, 'an unseen word is several tokens');
  for (const text of ['Hello world', "it's 東京 🙂\n\n\tx", 'numbers 12345 and 3.14'])
    assert.equal(tok.decode(tok.encode(text, false)), text);
});

test('encode: add_special_tokens (default, as vLLM for a prompt) adds <|begin_of_text|>; special token text maps to its id', () => {
  const plain = tok.encode('Hello world', false);
  assert.deepEqual(tok.encode('Hello world'), [BOS, ...plain]);
  assert.deepEqual(tok.encode('Hello world', true), [BOS, ...plain]);
  const withEot = tok.encode('Hi<|eot_id|>there', false);
  assert.ok(withEot.includes(EOT));
  assert.deepEqual(withEot, [...tok.encode('Hi', false), EOT, ...tok.encode('there', false)]);
  assert.deepEqual(tok.wrap, { before: [BOS], after: [] });
  assert.equal(tok.segmentable, true);
  assert.deepEqual([...tok.boundaryTokens.keys()].sort(), [...specials.keys()].sort());
});

const CHAT = [
  { role: 'system', content: 'You are helpful.' },
  { role: 'user', content: 'Hello world!' },
  { role: 'assistant', content: 'Hi there.' },
  {
    role: 'user',
    content: [
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b' },
    ],
  },
];

test('renderChat: Llama-3.1 shape, generation prompt by default, text parts joined by newlines, date from chat_template_kwargs', () => {
  assert.equal(
    tok.renderChat(CHAT, { chat_template_kwargs: { date_string: '1 Jan 2026' } }),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 1 Jan 2026\n\n' +
      'You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello world!<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\na\nb<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n',
  );
  const noPrompt = tok.renderChat(CHAT, { add_generation_prompt: false });
  assert.ok(noPrompt.includes('Today Date: 26 Jul 2024'), 'the template default without the kwarg');
  assert.ok(noPrompt.endsWith('a\nb<|eot_id|>'));
});

test('renderChat: tools as vLLM dumps them (absent fields null), tool calls with parsed arguments, tool results', () => {
  const messages = [
    { role: 'system', content: 'You are helpful.' },
    { role: 'user', content: 'Weather?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: '{"temp": 20}' },
  ];
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  ];
  assert.equal(
    tok.renderChat(messages, { tools, chat_template_kwargs: { tools_in_user_message: false } }),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n' +
      'Today Date: 26 Jul 2024\n\nYou have access to the following functions. To call a function, please respond with JSON for a function call.' +
      'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
      '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n        "description": null,\n' +
      '        "parameters": {\n            "type": "object",\n            "properties": {\n                "city": {\n' +
      '                    "type": "string"\n                }\n            }\n        }\n    }\n}\n\n' +
      'You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' +
      // a string is iterable to jinja: the template quotes the tool's result (as Python's jinja2 does)
      '<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temp\\": 20}"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  );
});

test('renderChat: continue_final_message ends the text right after the last message; both flags, image parts and template errors refuse', () => {
  const partial = [...CHAT.slice(0, 3), { role: 'assistant', content: 'The answer is' }];
  const text = tok.renderChat(partial, { add_generation_prompt: false, continue_final_message: true });
  assert.ok(text.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is'), text);
  assert.throws(() => tok.renderChat(partial, { continue_final_message: true }), ChatTemplateError);
  const image = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:' } }] }];
  assert.throws(() => tok.renderChat(image), ChatTemplateError);
  // the template's own raise_exception (tools but no user message to put them in)
  assert.throws(
    () => tok.renderChat([{ role: 'system', content: 'x' }], { tools: [{ type: 'function', function: { name: 'f' } }] }),
    ChatTemplateError,
  );
  assert.throws(() => tok.renderChat(['not a message']), ChatTemplateError);
});

test("renderChat: a request's own chat_template replaces the tokenizer's; named templates pick tool_use when tools are passed", () => {
  const own = '{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{{ flavour }}{% endif %}';
  assert.equal(
    tok.renderChat(CHAT.slice(1, 3), { chat_template: own, chat_template_kwargs: { flavour: 'x' } }),
    '[user:Hello world!][assistant:Hi there.]>x',
  );
  const named = HfTokenizer.fromObjects(tokenizerJson, config, [
    { name: 'default', template: 'D{{ messages | length }}' },
    { name: 'tool_use', template: 'T{{ tools | length }}' },
  ]);
  assert.equal(named.renderChat(CHAT), 'D4');
  assert.equal(named.renderChat(CHAT, { tools: [{ type: 'function', function: { name: 'f' } }] }), 'T1');
  const none = HfTokenizer.fromObjects(tokenizerJson, { ...config, chat_template: undefined });
  assert.equal(none.hasChatTemplate, false);
  assert.throws(() => none.renderChat(CHAT), ChatTemplateError);
});

test('contentFormat: a template looping over message content gets parts (vLLM "openai"), others joined text', () => {
  assert.equal(contentFormat(config.chat_template as string), 'string');
  const loops = "{% for m in messages %}{% for part in m['content'] %}{{ part.text }}{% endfor %}{% endfor %}";
  assert.equal(contentFormat(loops), 'openai');
  assert.equal(HfTokenizer.fromObjects(tokenizerJson, config, loops).renderChat(CHAT.slice(3)), 'ab');
});

test('a tokenizer whose pre-tokenizer treats the first section differently is not segmentable (nothing is reused)', () => {
  const metaspace = {
    ...tokenizerJson,
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
    post_processor: null,
    decoder: null,
    model: { ...(tokenizerJson.model as object), vocab: { ...vocab, '▁': 900 } },
  };
  const t = HfTokenizer.fromObjects(metaspace, config);
  // the text after a special token tokenizes differently alone than in place
  assert.notDeepEqual(t.encode('a<|eot_id|>b', false), [...t.encode('a<|eot_id|>', false), ...t.encode('b', false)]);
  assert.equal(t.segmentable, false);
});

test("the speed-ups (byte-level pieces by table, split and byte-level in one pass, the two-generation word cache, added tokens by regex) give the library's own ids", () => {
  const plain = new Tokenizer(tokenizerJson, config);
  const check = (text: string): void => {
    for (const special of [false, true])
      assert.deepEqual(tok.encode(text, special), plain.encode(text, { add_special_tokens: special }).ids, JSON.stringify(text));
  };
  for (let seed = 1; seed <= 40; seed++) check(tok.renderChat(conversation(seed, 3, 60)));
  fc.assert(
    fc.property(fc.string({ maxLength: 80, unit: 'binary' }), (s) => check(s)),
    { numRuns: 300, seed: 7 },
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 80, unit: 'grapheme' }), (s) => check(s)),
    { numRuns: 300, seed: 8 },
  );
  // added tokens whole, run together, cut short and inside words; words with and without a space before them
  const added = (tokenizerJson.added_tokens as { content: string }[]).map((t) => t.content);
  const fragment = fc.oneof(
    fc.constantFrom(...added),
    fc.constantFrom(...added).map((t) => t.slice(0, Math.max(1, t.length - 2))),
    fc.constantFrom(...added).map((t) => t.slice(2)),
    fc.constantFrom('Hello', ' world', ' ', '  ', '\n', '\n\n', 'x', ' x', '~', ' 42', "'s", '\t', 'é', ' 東京'),
  );
  fc.assert(
    fc.property(fc.array(fragment, { maxLength: 30 }), (parts) => check(parts.join(''))),
    { numRuns: 400, seed: 9 },
  );
  // and they are in place (the regex splitter replaced the trie walk)
  const lib = (tok as unknown as { tokenizer: { splitter_unnormalized: object; splitter_normalized: object; pre_tokenizer: object } })
    .tokenizer;
  assert.ok(Object.hasOwn(lib.splitter_unnormalized, 'split'));
  assert.ok(Object.hasOwn(lib.splitter_normalized, 'split'));
  // and the Split + ByteLevel sequence runs in one pass
  assert.ok(Object.hasOwn(lib.pre_tokenizer, 'pre_tokenize'));
});

test('a special token that another added token contains does not cut pieces (a longer text may hold the longer token)', () => {
  const json = structuredClone(tokenizerJson);
  const addedTokens = json.added_tokens as { id: number; content: string; special: boolean }[];
  const nextId = Math.max(...addedTokens.map((t) => t.id)) + 1;
  addedTokens.push({ ...(addedTokens.find((t) => t.content === '<|eot_id|>') as object), id: nextId, content: '<|eot_id|>!' } as {
    id: number;
    content: string;
    special: boolean;
  });
  const t = HfTokenizer.fromObjects(json, config);
  assert.equal(t.boundaryTokens.has('<|eot_id|>'), false);
  assert.equal(t.boundaryTokens.has('<|start_header_id|>'), true);
  assert.equal(tok.boundaryTokens.has('<|eot_id|>'), true);
});
