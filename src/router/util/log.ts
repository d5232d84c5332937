// Structured logs (pino). JSON for machines, one readable line per record for people; never prompts or credentials.
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const SKIP = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name']);

/** a value written bare would be misread: blanks, quotes, `=`, backslashes, control characters */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is looked for
const NEEDS_QUOTES = /[\s"=\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/**
 * One record as one line. Every text in it may come from outside (an engine's error text, a model name): control
 * characters are written as \uXXXX in the message and in every value, and a value that is not one bare word is
 * quoted, so nothing can end the line early, forge another record or drive a terminal.
 */
function textLine(record: Record<string, unknown>): string {
  const time = new Date(typeof record.time === 'number' ? record.time : Date.now()).toISOString();
  const level = LEVEL_NAMES[record.level as number] ?? String(record.level);
  let line = `${time} ${level.padEnd(5)} ${escapeControls(String(record.msg ?? ''))}`;
  for (const [k, v] of Object.entries(record)) {
    if (SKIP.has(k) || v === undefined) continue;
    const s = typeof v === 'string' && !NEEDS_QUOTES.test(v) ? v : escapeControls(JSON.stringify(v) ?? String(v));
    line += ` ${escapeControls(k)}=${s}`;
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

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is escaped
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Longest client-sent text a log line carries (a model name a 404 names, say). */
export const LOGGED_TEXT_CHARS = 128;

/**
 * Text a client sent, made safe for a log line: cut to `maxChars` characters, then control characters (C0, DEL, C1,
 * the Unicode line and paragraph separators) written as \uXXXX, so it cannot forge lines or drive a terminal.
 */
export function loggable(text: string, maxChars = LOGGED_TEXT_CHARS): string {
  // a code-point cut keeps surrogate pairs whole; the first slice bounds the work for a huge input
  const cut = Array.from(text.slice(0, 2 * maxChars))
    .slice(0, maxChars)
    .join('');
  return escapeControls(cut);
}

/** Control characters (C0, DEL, C1, the Unicode line and paragraph separators) written as \uXXXX. */
function escapeControls(text: string): string {
  return text.replace(CONTROL_CHARACTERS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
