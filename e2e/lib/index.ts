// Reusable browser-test harness: Debian Chromium with(out) WebGPU, Vite-built pages on 127.0.0.1, scenario calls,
// console capture and artifacts. See e2e/README.md.
export * from './artifacts.ts';
export * from './chromium.ts';
export * from './console.ts';
export * from './scenario.ts';
export * from './serve.ts';
export * from './ort-log.ts';
export * from './netns.ts';
