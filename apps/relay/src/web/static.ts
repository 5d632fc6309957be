// Serves the web app's build (apps/web/dist) from the relay: its assets, and index.html for the app's
// client-side routes (`/`, `/runs/:id`, `/admin`). When the build is missing, every route here passes on, so
// `/` falls back to the relay's plain status page (routes/status.ts) and nothing else changes.
import { createReadStream, existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Hono } from 'hono';
import type { Context, Next } from 'hono';

/** apps/web/dist, relative to this file (apps/relay/src/web/static.ts). */
export const DEFAULT_WEB_DIST = fileURLToPath(new URL('../../../web/dist', import.meta.url));

const MIME: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  // application/wasm is required for WebAssembly.instantiateStreaming, which ORT uses.
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

/** The Content-Type a static file is served with (by extension; unknown ones as octet-stream). */
export function contentTypeOf(path: string): string {
  return MIME[extname(path)] ?? 'application/octet-stream';
}

export interface WebRoutesOptions {
  /** The web build's directory (default apps/web/dist). */
  distDir?: string;
}

/** Routes that serve the web build. Mount at '/' before the status routes so the app owns `/`. */
export function webRoutes(opts: WebRoutesOptions = {}): Hono {
  const root = resolve(opts.distDir ?? DEFAULT_WEB_DIST);
  const app = new Hono();
  const hasBuild = () => existsSync(join(root, 'index.html'));

  const sendFile = async (c: Context, file: string, cache: string): Promise<Response | undefined> => {
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) return undefined;
    const headers = {
      'Content-Type': contentTypeOf(file),
      'Cache-Control': cache,
      'X-Content-Type-Options': 'nosniff',
    };
    const sized = { ...headers, 'Content-Length': String(info.size) };
    if (c.req.method === 'HEAD') return c.body(null, 200, sized);
    // Streamed: the build includes onnxruntime-web's 27 MB wasm.
    return c.body(Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>, 200, sized);
  };

  // index.html may change with every build: always revalidate. Hashed assets never change.
  const spa = async (c: Context, next: Next) => {
    if (!hasBuild()) return next();
    return (await sendFile(c, join(root, 'index.html'), 'no-cache')) ?? next();
  };
  for (const path of ['/', '/admin', '/runs/:id']) {
    app.get(path, spa);
    app.on('HEAD', path, spa);
  }

  const asset = async (c: Context, next: Next) => {
    const rel = decodeURIComponent(c.req.path).replace(/^\/+/, '');
    const file = resolve(root, rel);
    if (!file.startsWith(root + sep) || rel.split('/').some((p) => p.startsWith('.'))) return next();
    const immutable = rel.startsWith('assets/');
    return (
      (await sendFile(c, file, immutable ? 'public, max-age=31536000, immutable' : 'no-cache')) ?? next()
    );
  };
  for (const path of ['/assets/*', '/favicon.svg']) {
    app.get(path, asset);
    app.on('HEAD', path, asset);
  }
  return app;
}
