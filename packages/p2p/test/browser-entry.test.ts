import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The browser entry must not reach Node-only code: Vite would either fail on `node:` built-ins or ship
 * stubs that throw at runtime. Walks the relative-import graph from src/browser.ts and checks every module.
 */
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');
const NODE_ONLY = [/^node:/, /^@libp2p\/tcp$/, /^fs$/, /^net$/, /^os$/];

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'"]*from\s+'([^']+)'/gm)].map((m) => m[1] ?? '');
}

describe('browser entry point', () => {
  it('imports no Node-only module, directly or through our own modules', () => {
    const seen = new Set<string>();
    const offending: string[] = [];
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of importsOf(file)) {
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
        else if (NODE_ONLY.some((re) => re.test(spec))) offending.push(`${file}: ${spec}`);
      }
    };
    visit(resolve(SRC, 'browser.ts'));
    expect(seen.has(resolve(SRC, 'node.ts'))).toBe(false);
    expect(seen.size).toBeGreaterThan(5);
    expect(offending).toEqual([]);
  });
});
