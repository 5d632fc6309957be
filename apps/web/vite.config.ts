// Vite config for the web app: Svelte 5, output in dist/ (the relay serves it), and in `vite dev` a proxy of
// the relay's HTTP and WebSocket routes to a running relay (MESHTRAIN_RELAY, default http://127.0.0.1:8080).
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const relay = process.env.MESHTRAIN_RELAY ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [svelte()],
  // The repository's public/ holds static files copied verbatim into the build (favicon, robots.txt).
  publicDir: fileURLToPath(new URL('../../public', import.meta.url)),
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, target: 'es2023' },
  worker: { format: 'es' },
  server: {
    host: '127.0.0.1',
    proxy: {
      '/api': relay,
      '/metrics': relay,
      '/healthz': relay,
      '/ws': { target: relay.replace(/^http/, 'ws'), ws: true },
    },
  },
});
