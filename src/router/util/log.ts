// Structured logs (pino). JSON for machines, one readable line per record for people; never prompts or credentials.
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const SKIP = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name']);

function textLine(record: Record<string, unknown>): string {
  const time = new Date(typeof record.time === 'number' ? record.time : Date.now()).toISOString();
  const level = LEVEL_NAMES[record.level as number] ?? String(record.level);
  let line = `${time} ${level.padEnd(5)} ${String(record.msg ?? '')}`;
  for (const [k, v] of Object.entries(record)) {
    if (SKIP.has(k) || v === undefined) continue;
    const s = typeof v === 'string' ? (/[\s"=]/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v);
    line += ` ${k}=${s}`;
  }
  return line + '\n';
}

function textDestination(out: NodeJS.WritableStream): DestinationStream {
  return {
    write(chunk: string) {
      try {
        out.write(textLine(JSON.parse(chunk) as Record<string, unknown>));
      } catch {
        out.write(chunk);
      }
    },
  };
}

export function createLogger(opts: { level: string; format: 'text' | 'json'; out?: NodeJS.WritableStream }): Logger {
  const out = opts.out ?? process.stderr;
  return pino(
    {
      level: opts.level,
      base: undefined,
      redact: {
        paths: ['authorization', 'headers.authorization', 'req.headers.authorization', '*.apiKey', 'apiKey'],
        censor: '[redacted]',
      },
    },
    opts.format === 'json' ? (out as DestinationStream) : textDestination(out),
  );
}
