// Svelte compiler options for vite-plugin-svelte and svelte-check. TypeScript in components is plain
// erasable syntax, which Svelte 5 strips itself: no preprocessor needed.
export default {
  compilerOptions: { runes: true },
};
