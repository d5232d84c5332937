// A logger whose JSON lines a test reads back: what the router would print, kept in memory.
import { Writable } from 'node:stream';
import { createLogger } from '../../src/router/util/log.js';

export function capturedLog(level: 'debug' | 'info' | 'warn' = 'info'): { log: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const out = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: createLogger({ level, format: 'json', out }), lines };
}
