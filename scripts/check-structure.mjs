#!/usr/bin/env node
// Fails when the source tree breaks the layering rules docs/architecture.md "Layers" states: an import loop
// among the source files of packages/ and apps/ (value imports; a type-only import is erased and cannot loop at
// run time, but it still counts for the wire/coordinator rule), an import between core's wire codecs and its
// coordinator in either direction, a workspace package that imports another one its package.json does not
// declare, or a relay source file over MAX_RELAY_FILE_LINES lines. Function length is eslint's
// max-lines-per-function, which sees the same tree.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..');
const MAX_RELAY_FILE_LINES = 400;
const SKIP = new Set(['node_modules', 'dist', 'test', 'e2e', '.cache']);

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name)) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const workspaces = [];
for (const group of ['packages', 'apps'])
  for (const name of readdirSync(join(root, group))) {
    const pkgFile = join(root, group, name, 'package.json');
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'));
    const declared = new Set(Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }));
    workspaces.push({ dir: join(root, group, name), name: pkg.name, declared });
  }
const workspaceOf = (file) => workspaces.find((w) => file.startsWith(w.dir + '/'));
const workspaceNames = new Set(workspaces.map((w) => w.name));

function resolveRelative(from, spec) {
  const base = resolve(dirname(from), spec);
  for (const c of [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')])
    if (existsSync(c) && c.endsWith('.ts')) return c;
  return null;
}

/** Module specifiers of `file`: { spec, typeOnly }. */
function importsOf(file) {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out = [];
  for (const n of sf.statements) {
    if (!(ts.isImportDeclaration(n) || ts.isExportDeclaration(n))) continue;
    if (!n.moduleSpecifier || !ts.isStringLiteral(n.moduleSpecifier)) continue;
    const typeOnly = ts.isImportDeclaration(n) ? n.importClause?.isTypeOnly === true : n.isTypeOnly;
    out.push({ spec: n.moduleSpecifier.text, typeOnly });
  }
  return out;
}

const problems = [];
const files = [...walk(join(root, 'packages'), []), ...walk(join(root, 'apps'), [])];
const graph = new Map();
const wire = join(root, 'packages/core/src/wire') + '/';
const coordinator = join(root, 'packages/core/src/coordinator') + '/';
const config = join(root, 'packages/core/src/config') + '/';
for (const f of files) {
  const edges = [];
  const ws = workspaceOf(f);
  for (const { spec, typeOnly } of importsOf(f)) {
    if (spec.startsWith('.')) {
      const target = resolveRelative(f, spec);
      if (!target) continue;
      if (!typeOnly) edges.push(target);
      const crossing =
        (f.startsWith(wire) && target.startsWith(coordinator)) ||
        (f.startsWith(coordinator) && target.startsWith(wire));
      if (crossing)
        problems.push(
          `${relative(root, f)} imports ${relative(root, target)}: wire/ and coordinator/ stay apart`,
        );
      if (f.startsWith(coordinator) && target.startsWith(config))
        problems.push(
          `${relative(root, f)} imports ${relative(root, target)}: config/ builds on coordinator/`,
        );
    } else {
      const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
      if (ws && workspaceNames.has(pkg) && pkg !== ws.name && !ws.declared.has(pkg))
        problems.push(
          `${relative(root, f)} imports ${pkg}, which ${ws.name}'s package.json does not declare`,
        );
    }
  }
  graph.set(f, edges);
  if (f.startsWith(join(root, 'apps/relay/src') + '/')) {
    const lines = readFileSync(f, 'utf8').split('\n').length;
    if (lines > MAX_RELAY_FILE_LINES)
      problems.push(`${relative(root, f)}: ${lines} lines (at most ${MAX_RELAY_FILE_LINES})`);
  }
}

// Tarjan's strongly connected components: every component of more than one file is a loop.
let counter = 0;
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
function connect(v) {
  index.set(v, counter);
  low.set(v, counter);
  counter++;
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!index.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
  }
  if (low.get(v) !== index.get(v)) return;
  const component = [];
  let w;
  do {
    w = stack.pop();
    onStack.delete(w);
    component.push(w);
  } while (w !== v);
  if (component.length > 1)
    problems.push(`import loop: ${component.map((x) => relative(root, x)).join(' → ')}`);
}
for (const v of graph.keys()) if (!index.has(v)) connect(v);

if (problems.length > 0) {
  for (const p of problems) console.error(p);
  console.error(`\n${problems.length} structure problem(s)`);
  process.exit(1);
}
console.log(`structure: ${files.length} source files, no import loop, layers and package declarations hold`);
