// Lets the root `tsc -p tsconfig.json` (which checks apps/*/src/**/*.ts but not .svelte files) type the
// .svelte and .css imports of main.ts; svelte-check in apps/web checks the components themselves.
declare module '*.svelte' {
  import type { Component } from 'svelte';
  const component: Component<Record<string, unknown>>;
  export default component;
}
declare module '*.css';
