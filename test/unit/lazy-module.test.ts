// src/router/util/lazy-module.ts: the router's code loads the packages only some settings use when first called for,
// not when it is imported (each serve and sim start would pay for them).
// run-tests: own process (it looks at which packages this process has loaded)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const LAZY = [/[/\\]zeromq[/\\]/, /[/\\]@msgpack[/\\]msgpack[/\\]/, /[/\\]@huggingface[/\\](tokenizers|jinja)[/\\]/, /[/\\]busboy[/\\]/];
const loaded = (): string[] => Object.keys(require.cache).filter((k) => LAZY.some((re) => re.test(k)));

test('importing the router and the simulator loads none of them; the first call loads one', async () => {
  await import('../../src/router/app/app.js');
  await import('../../src/tools/sim/engine.js');
  assert.deepEqual(loaded(), [], 'loaded at import');
  const { lazyModule } = await import('../../src/router/util/lazy-module.js');
  const busboy = lazyModule<unknown>('busboy');
  assert.deepEqual(loaded(), [], 'a loader alone loads nothing');
  assert.equal(typeof busboy(), 'function');
  assert.equal(busboy(), busboy(), 'loaded once');
  assert.ok(loaded().some((k) => /busboy/.test(k)));
});
