// Turns zod issues into ConfigIssues: one per problem, with the dotted TOML key path and a message written for
// someone editing the file (what was expected, what was found, and the key they probably meant).
import { z } from 'zod';
import { formatPath, type ConfigIssue } from './errors.ts';
import { closest } from './suggest.ts';

type Path = readonly PropertyKey[];

/** The value at `path` in the raw TOML document (undefined where absent). */
function valueAt(doc: unknown, path: Path): unknown {
  let node = doc;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/** The schemas that may describe the value at `path` (several where a union leaves the choice open). */
function schemasAt(root: z.ZodType, path: Path): z.ZodType[] {
  let nodes = [root];
  for (const key of path) {
    const next: z.ZodType[] = [];
    for (const node of nodes.flatMap(branches)) {
      if (node instanceof z.ZodObject && typeof key === 'string') {
        const child = (node.shape as Record<string, z.ZodType>)[key];
        if (child) next.push(child);
      } else if (node instanceof z.ZodArray && typeof key === 'number') {
        next.push(node.element as z.ZodType);
      }
    }
    nodes = next;
  }
  return nodes.flatMap(branches);
}

/** Looks through optional, transform and union wrappers to the schemas that actually check a value. */
function branches(schema: z.ZodType): z.ZodType[] {
  if (schema instanceof z.ZodOptional) return branches(schema.unwrap() as z.ZodType);
  if (schema instanceof z.ZodPipe) return branches(schema.in as z.ZodType);
  if (schema instanceof z.ZodUnion) return (schema.options as z.ZodType[]).flatMap(branches);
  return [schema];
}

function keysOf(schemas: z.ZodType[]): string[] {
  return schemas.flatMap((s) => (s instanceof z.ZodObject ? Object.keys(s.shape) : []));
}

function unitVariantsOf(schemas: z.ZodType[]): string[] {
  return schemas.flatMap((s) => {
    if (s instanceof z.ZodLiteral) return [...s.values].map(String);
    if (s instanceof z.ZodEnum) return s.options.map(String);
    return [];
  });
}

/** How TOML would name the type of a parsed value. */
function tomlType(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  if (typeof value === 'boolean') return `boolean ${value}`;
  if (typeof value === 'number') return Number.isInteger(value) ? `integer ${value}` : `float ${value}`;
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Date) return 'a date-time';
  return 'a table';
}

const EXPECTED: Record<string, string> = {
  number: 'a number',
  int: 'an integer',
  string: 'a string',
  boolean: 'a boolean (true or false)',
  object: 'a table',
  array: 'an array',
  tuple: 'an array',
};

function didYouMean(word: string, candidates: string[]): string {
  const hint = closest(word, candidates);
  return hint ? ` (did you mean ${hint}?)` : '';
}

function mapIssue(issue: z.core.$ZodIssue, base: Path, doc: unknown, root: z.ZodType): ConfigIssue[] {
  const path = [...base, ...issue.path];
  const input = valueAt(doc, path);
  const at = formatPath(path);
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = keysOf(schemasAt(root, path));
      return issue.keys.map((key) => ({
        path: formatPath([...path, key]),
        message: `unknown key${didYouMean(key, known)}`,
      }));
    }
    case 'invalid_type': {
      if (input === undefined) return [{ path: at, message: 'required key is missing' }];
      if (typeof input === 'number' && Number.isNaN(input))
        return [{ path: at, message: 'must be a number, not nan' }];
      const expected = EXPECTED[issue.expected] ?? issue.expected;
      return [{ path: at, message: `expected ${expected}, got ${tomlType(input)}` }];
    }
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? issue.minimum : issue.maximum;
      const inclusive = issue.inclusive !== false;
      if (issue.origin === 'number' || issue.origin === 'int') {
        const op = issue.code === 'too_small' ? (inclusive ? '>=' : '>') : inclusive ? '<=' : '<';
        return [{ path: at, message: `must be ${op} ${String(bound)} (got ${String(input)})` }];
      }
      if (issue.origin === 'array') {
        const n = Array.isArray(input) ? input.length : 0;
        return [{ path: at, message: `must have exactly ${String(bound)} elements (got ${n})` }];
      }
      return [{ path: at, message: issue.message }];
    }
    case 'invalid_value': {
      const values = issue.values.map((v) => JSON.stringify(v));
      const hint = typeof input === 'string' ? didYouMean(input, issue.values.map(String)) : '';
      return [{ path: at, message: `must be one of ${values.join(', ')} (got ${tomlType(input)})${hint}` }];
    }
    case 'invalid_union':
      return mapUnion(issue, path, input, doc, root);
    default:
      return [{ path: at, message: issue.message }];
  }
}

/**
 * A serde enum is a union of a variant name (string) and a one-key table. Report against the form the user
 * wrote: for a table, the table's own problems; for a string, which names exist.
 */
function mapUnion(
  issue: z.core.$ZodIssueInvalidUnion,
  path: Path,
  input: unknown,
  doc: unknown,
  root: z.ZodType,
): ConfigIssue[] {
  const at = formatPath(path);
  const schemas = schemasAt(root, path);
  const units = unitVariantsOf(schemas);
  const tables = keysOf(schemas);
  const forms = [...units.map((u) => JSON.stringify(u)), ...tables.map((t) => `[${at}.${t}]`)].join(' | ');
  if (input === undefined) return [{ path: at, message: `required key is missing: give one of ${forms}` }];
  if (typeof input === 'string') {
    if (tables.includes(input))
      return [{ path: at, message: `variant ${input} needs settings: write it as a table [${at}.${input}]` }];
    return [
      {
        path: at,
        message: `unknown variant ${JSON.stringify(input)}${didYouMean(input, [...units, ...tables])}; expected ${forms}`,
      },
    ];
  }
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    // The string branch fails at the root with a type or value error; the table branch is the other one.
    const rejectsRoot = (e: z.core.$ZodIssue) =>
      e.path.length === 0 && (e.code === 'invalid_type' || e.code === 'invalid_value');
    const tableBranch = issue.errors.find((errs) => !errs.some(rejectsRoot));
    if (tableBranch) return tableBranch.flatMap((e) => mapIssue(e, path, doc, root));
  }
  return [{ path: at, message: `expected ${forms}, got ${tomlType(input)}` }];
}

export function configIssuesFromZod(error: z.ZodError, doc: unknown, root: z.ZodType): ConfigIssue[] {
  return error.issues.flatMap((issue) => mapIssue(issue, [], doc, root));
}
