#!/usr/bin/env node
// Fails when a source file cites a Markdown section that does not exist: a path ending in `.md` followed by a
// quoted section title (a bare file name must be unique in the repository). A title matches a heading that
// equals it or starts with it and goes on after a non-letter ("HTTP API" matches "HTTP API (routes)").
// Comments point readers at the specification; a renamed or removed section would leave them pointing at
// nothing.
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const SOURCE = /\.(ts|mts|mjs|js|svelte|py)$/;
const SKIP = new Set(['node_modules', 'dist', '.cache', '.git', 'artifacts', 'coverage']);

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name)) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

const files = walk(root, []);
const markdown = files.filter((f) => f.endsWith('.md'));
const byName = new Map();
for (const f of markdown) byName.set(basename(f), [...(byName.get(basename(f)) ?? []), f]);

/** Heading texts of a Markdown file, with a leading section number ("15a. ") dropped. */
const headingsMemo = new Map();
function headings(file) {
  let h = headingsMemo.get(file);
  if (!h) {
    h = new Set();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (m) {
        h.add(m[1]);
        h.add(m[1].replace(/^\d+[a-z]?\.\s+/, ''));
      }
    }
    headingsMemo.set(file, h);
  }
  return h;
}

function resolveDoc(ref) {
  if (ref.includes('/')) {
    const full = join(root, ref);
    return markdown.includes(full) ? full : null;
  }
  const found = byName.get(ref) ?? [];
  return found.length === 1 ? found[0] : null;
}

// A path ending in .md, then only spaces, comment markers or a comma, then a quoted title.
const CITATION = /([A-Za-z0-9_./-]+\.md)(?:[\s,]|\/\/|\*|#)*"([^"\n]{1,100})"/g;
const problems = [];
for (const file of files.filter((f) => SOURCE.test(f))) {
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(CITATION)) {
    const [, ref, title] = m;
    const line = text.slice(0, m.index).split('\n').length;
    const where = `${relative(root, file)}:${line}`;
    const doc = resolveDoc(ref);
    if (!doc) problems.push(`${where}: cites ${ref}, which is not a (unique) file in the repository`);
    else if (
      ![...headings(doc)].some(
        (h) => h === title || (h.startsWith(title) && /^[^\p{L}\p{N}]/u.test(h.slice(title.length))),
      )
    )
      problems.push(`${where}: cites ${ref} "${title}", which has no such section`);
  }
}
if (problems.length > 0) {
  console.error(
    `check-doc-refs: ${problems.length} citation(s) of missing sections:\n${problems.join('\n')}`,
  );
  process.exit(1);
}
console.log('check-doc-refs: every cited section exists');
