// `npm run e2e`: whole-product browser scenarios (e2e/scenarios) over a real relay process and real Chromium.
// The global setup builds apps/web when its dist is missing or older than its sources.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['e2e/scenarios/**/*.test.ts'],
    globalSetup: ['e2e/scenarios/support/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Each file starts its own relay and browsers; on CI's 2 cores, one file at a time keeps timings sane.
    fileParallelism: false,
    reporters: ['default', ['json', { outputFile: '.cache/test-results/e2e.json' }]],
  },
});
