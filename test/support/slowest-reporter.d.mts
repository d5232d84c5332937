export function slowestLines(byFile: ReadonlyMap<string, number>, wallMs: number, count?: number, root?: string): string[];
export function durationRecord(byFile: ReadonlyMap<string, number>, root?: string): Record<string, number>;
export default function slowestReporter(
  source: AsyncIterable<{ type: string; data?: { nesting?: number; file?: string; details?: { duration_ms?: number } } }>,
): AsyncGenerator<string>;
