// The linter's two output formats: text for people, JSON for tools.
import { RULES, type Finding } from './rules.js';

export interface Summary {
  readonly errors: number;
  readonly warnings: number;
  readonly objects: number;
  readonly files: number;
}

export function summarise(findings: readonly Finding[], objects: number, files: number): Summary {
  return {
    errors: findings.filter((f) => f.severity === 'error').length,
    warnings: findings.filter((f) => f.severity === 'warning').length,
    objects,
    files,
  };
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

export function formatText(findings: readonly Finding[], summary: Summary): string {
  const lines: string[] = [];
  for (const f of findings) {
    lines.push(
      `${f.file}:${f.line}:${f.column}: ${f.severity} ${f.rule}: ${f.object}${f.namespace ? ` in ${f.namespace}` : ''}, container ${f.container}`,
    );
    lines.push(`    why: ${f.why}`);
    lines.push(`    fix: ${f.fix}`);
  }
  lines.push(
    `${plural(summary.errors, 'error')}, ${plural(summary.warnings, 'warning')} in ${plural(summary.objects, 'object')} from ${plural(summary.files, 'file')}`,
  );
  return lines.join('\n') + '\n';
}

export function formatJson(findings: readonly Finding[], summary: Summary): string {
  return JSON.stringify({ findings, summary }, null, 2) + '\n';
}

export function formatRules(): string {
  return RULES.map((r) => `${r.id.padEnd(26)} ${r.severity.padEnd(8)} ${r.summary}`).join('\n') + '\n';
}
