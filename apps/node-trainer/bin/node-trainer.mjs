#!/usr/bin/env node
import { runTs } from '../../../scripts/run-ts.mjs';

await runTs(new URL('../src/cli.ts', import.meta.url), process.argv.slice(2));
