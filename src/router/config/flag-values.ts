// What a flag's value may be, as a zod schema built from its spec (kind, choices, min): the one check of a value
// whichever source it came from (argv and env give text; the config file gives text, numbers, booleans or lists).
import { z } from 'zod';
import type { FlagSpec, FlagValue } from './flags.js';

const TRUTHY = ['1', 'true', 'yes', 'on', ''];
const FALSY = ['0', 'false', 'no', 'off'];

const shown = (input: unknown): string => JSON.stringify(input) ?? String(input);

/** Comma-separated items, trimmed, empty ones dropped. */
export function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

const scalar = z.union([z.string(), z.number(), z.boolean()], {
  error: (iss) => `expected a text value, got ${shown(iss.input)}`,
});

const booleanValue = z.union(
  [
    z.boolean(),
    z
      .string()
      .trim()
      .pipe(z.stringbool({ truthy: TRUTHY, falsy: FALSY, case: 'insensitive' })),
  ],
  { error: (iss) => `expected true or false, got ${shown(iss.input)}` },
);

function numberValue(spec: FlagSpec): z.ZodType<number> {
  let checked = z.number({ error: (iss) => `expected a number, got ${shown(iss.input)}` });
  if (spec.kind === 'int') checked = checked.int({ error: (iss) => `expected a whole number, got ${shown(iss.input)}` });
  if (spec.min !== undefined) {
    const min = spec.min;
    checked = checked.min(min, { error: (iss) => `must be at least ${min}, got ${shown(iss.input)}` });
  }
  // Number('') is 0 and Number(' 7 ') is 7: text must hold a number, surrounding blanks aside
  const text = z
    .string()
    .refine((s) => s.trim() !== '' && Number.isFinite(Number(s)))
    .transform((s) => Number(s));
  return z.union([z.number(), text], { error: (iss) => `expected a number, got ${shown(iss.input)}` }).pipe(checked);
}

const listValue = z
  .union([z.array(scalar), scalar], { error: (iss) => `expected a list of text values, got ${shown(iss.input)}` })
  .transform((v) => (Array.isArray(v) ? v : [v]).flatMap((item) => splitList(String(item))));

function stringValue(spec: FlagSpec): z.ZodType<string> {
  const text = scalar.transform(String);
  const choices = spec.choices;
  if (!choices) return text;
  return text.pipe(
    z.string().refine((s) => choices.includes(s), {
      error: (iss) => `must be one of ${choices.join(', ')}; got ${shown(iss.input)}`,
    }),
  );
}

function build(spec: FlagSpec): z.ZodType<FlagValue> {
  switch (spec.kind) {
    case 'boolean':
      return booleanValue;
    case 'int':
    case 'number':
      return numberValue(spec);
    case 'list':
    case 'repeat':
      return listValue;
    case 'string':
      return stringValue(spec);
  }
}

const schemas = new WeakMap<FlagSpec, z.ZodType<FlagValue>>();

/** The spec's schema, built once per spec. */
export function valueSchema(spec: FlagSpec): z.ZodType<FlagValue> {
  let schema = schemas.get(spec);
  if (!schema) {
    schema = build(spec);
    schemas.set(spec, schema);
  }
  return schema;
}

/** One raw value as the spec's kind, or the first reason it is not one. */
export function readValue(spec: FlagSpec, raw: unknown): { ok: true; value: FlagValue } | { ok: false; reason: string } {
  const r = valueSchema(spec).safeParse(raw);
  if (r.success) return { ok: true, value: r.data };
  return { ok: false, reason: r.error.issues[0]?.message ?? 'invalid value' };
}
