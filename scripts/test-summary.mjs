#!/usr/bin/env node
// Prints one closing line "N passed, N failed, N skipped" summed over vitest JSON reports, so CI can read the
// outcome of every suite without parsing vitest's coloured output. Exits 1 when a report is missing or failed.
import { existsSync, readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let skipped = 0;
let ok = true;
for (const file of process.argv.slice(2)) {
  if (!existsSync(file)) {
    console.error(`test-summary: no report at ${file}`);
    ok = false;
    continue;
  }
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + r.numTodoTests;
  if (!r.success) ok = false;
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(ok && failed === 0 && passed > 0 ? 0 : 1);
