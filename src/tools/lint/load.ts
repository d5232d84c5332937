// Reads Kubernetes YAML for the linter: files, directories (recursively, *.yaml/*.yml/*.json) or stdin;
// multi-document streams and `kind: List`; each object keeps its file and line for the report.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { type Document, isMap, isScalar, isSeq, LineCounter, parseAllDocuments } from 'yaml';

export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
    readonly ownerReferences?: readonly unknown[];
  };
  readonly spec?: Record<string, unknown>;
  readonly items?: unknown[];
}

/** A node's place in an object, as keys and indexes from its root: ['spec', 'template', 'spec', 'containers', 0]. */
export type NodePath = readonly (string | number)[];

/** 1-based, as editors count */
export interface Position {
  readonly line: number;
  readonly column: number;
}

export interface LoadedObject {
  readonly file: string;
  /** where the object starts */
  readonly line: number;
  readonly object: KubeObject;
  /** Where the node at `path` in the object is written: its key's place (a list item's own), else its nearest ancestor's. */
  position(path: NodePath): Position;
}

/** Input that cannot be linted: unreadable, or not YAML. The message names the file and line. */
export class LintInputError extends Error {}

export interface Loaded {
  readonly objects: LoadedObject[];
  readonly files: string[];
  /** notes for stderr, e.g. a Helm chart directory that was skipped */
  readonly notes: string[];
}

const MANIFEST = /\.(ya?ml|json)$/i;

function walk(dir: string, out: string[], notes: string[]): void {
  if (existsSync(path.join(dir, 'Chart.yaml'))) {
    notes.push(`skipped Helm chart ${dir}: lint what it renders (helm template ... | llm-router lint -)`);
    return;
  }
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith('.') || name === 'node_modules') continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) walk(full, out, notes);
    else if (MANIFEST.test(name)) out.push(full);
  }
}

function isObject(v: unknown): v is KubeObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses one YAML stream; throws LintInputError with file:line:column on bad YAML. */
export function parseManifests(text: string, file: string): LoadedObject[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [docs];
  const out: LoadedObject[] = [];
  for (const doc of list) {
    const error = doc.errors[0];
    if (error) {
      const at = error.linePos?.[0] ?? lineCounter.linePos(error.pos[0]);
      const template = /\{\{.*\}\}/.test(text)
        ? ' (it looks like an unrendered Helm template: lint the output of helm template instead)'
        : '';
      throw new LintInputError(`${file}:${at.line}:${at.col}: not valid YAML: ${error.message.split('\n')[0]}${template}`);
    }
    const value: unknown = doc.toJS({ maxAliasCount: 1000 });
    if (!isObject(value)) continue;
    const loaded = (object: KubeObject, root: NodePath): LoadedObject => {
      const position = (path: NodePath): Position => positionOf(doc, lineCounter, root, path);
      return { file, line: position([]).line, object, position };
    };
    if (value.kind === 'List' || (typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items))) {
      (value.items ?? []).forEach((item, i) => {
        if (isObject(item)) out.push(loaded(item, ['items', i]));
      });
    } else out.push(loaded(value, []));
  }
  return out;
}

/**
 * Where `path` (under `root`, the object's place in its document) is written: the key of a map entry, the start of a
 * list item; a node the path does not reach (a field the object lacks) gives its nearest ancestor's place.
 */
function positionOf(doc: Document.Parsed, lines: LineCounter, root: NodePath, path: NodePath): Position {
  const full = [...root, ...path];
  for (let n = full.length; n >= 0; n--) {
    const offset = offsetOf(doc, full.slice(0, n));
    if (offset !== undefined) {
      const { line, col } = lines.linePos(offset);
      return { line, column: col };
    }
  }
  return { line: 1, column: 1 };
}

function offsetOf(doc: Document.Parsed, path: NodePath): number | undefined {
  if (path.length === 0) return doc.contents?.range?.[0];
  const parent = path.length === 1 ? doc.contents : doc.getIn(path.slice(0, -1), true);
  const last = path[path.length - 1];
  if (isMap(parent)) {
    const pair = parent.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === last);
    return isScalar(pair?.key) ? pair.key.range?.[0] : undefined;
  }
  if (isSeq(parent) && typeof last === 'number') {
    const item = parent.items[last] as { range?: [number, number, number] } | null | undefined;
    return item?.range?.[0];
  }
  return undefined;
}

/** Loads every manifest named by the arguments; `-` is stdin (its text is passed in). */
export function loadManifests(inputs: readonly string[], stdin: () => string): Loaded {
  const files: string[] = [];
  const notes: string[] = [];
  for (const input of inputs) {
    if (input === '-') {
      files.push('-');
      continue;
    }
    if (!existsSync(input)) throw new LintInputError(`${input}: no such file or directory`);
    if (statSync(input).isDirectory()) walk(input, files, notes);
    else files.push(input);
  }
  const objects: LoadedObject[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = file === '-' ? stdin() : readFileSync(file, 'utf8');
    } catch (err) {
      throw new LintInputError(`${file}: cannot read: ${(err as Error).message}`);
    }
    objects.push(...parseManifests(text, file === '-' ? '<stdin>' : file));
  }
  return { objects, files: files.map((f) => (f === '-' ? '<stdin>' : f)), notes };
}
