// Serves test pages on 127.0.0.1 (never a public interface) on a random free port.
//
// Pages are bundled once with Vite's programmatic build() into a temp dir and then served by a plain static server:
// no dev server means no dependency pre-bundling on first request, no HMR socket and no file watching, so a test
// sees exactly the bytes it will always see. Large runtime files (onnxruntime-web's 27 MB wasm) are mounted from
// node_modules instead of being copied into every build, and in-memory files carry per-test data (ONNX bytes,
// parameters) to the page without base64 round trips through page.evaluate.
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contentTypeOf } from '../../apps/relay/src/web/static.ts';

/** The repository root (e2e/lib/ is two levels below it). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Where onnxruntime-web's runtime files live; mount it and point ort.env.wasm.wasmPaths at the mount. */
export const ORT_WEB_DIST = resolve(REPO_ROOT, 'node_modules/onnxruntime-web/dist');

export interface StaticServerOptions {
  /** Directory served at "/" (index.html for directory requests). */
  root?: string;
  /** URL prefix → directory, e.g. {'/ort/': ORT_WEB_DIST}. Longest prefix wins. */
  mounts?: Readonly<Record<string, string>>;
  /** In-memory files by exact URL path. */
  files?: Readonly<Record<string, Uint8Array | string>>;
  /**
   * Send COOP/COEP so the page is cross-origin isolated (SharedArrayBuffer, multi-threaded ORT wasm).
   * Off by default: tests run ORT single-threaded, which needs no isolation.
   */
  crossOriginIsolated?: boolean;
}

export interface StaticServer {
  /** Base URL without trailing slash, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  readonly port: number;
  /** Adds or replaces an in-memory file. */
  setFile(path: string, body: Uint8Array | string): void;
  close(): Promise<void>;
}

export async function serveStatic(options: StaticServerOptions): Promise<StaticServer> {
  const files = new Map<string, Uint8Array | string>(Object.entries(options.files ?? {}));
  const mounts = Object.entries(options.mounts ?? {})
    .map(([prefix, dir]) => [prefix.endsWith('/') ? prefix : `${prefix}/`, resolve(dir)] as const)
    .sort((a, b) => b[0].length - a[0].length);
  const root = options.root === undefined ? undefined : resolve(options.root);

  const headersFor = (path: string): Record<string, string> => ({
    'content-type': contentTypeOf(path),
    // Every test run is a fresh build; never let the profile cache stale bytes across runs that reuse a profile.
    'cache-control': 'no-store',
    ...(options.crossOriginIsolated === true
      ? { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' }
      : {}),
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const mem = files.get(path);
    if (mem !== undefined) {
      const body = typeof mem === 'string' ? Buffer.from(mem) : mem;
      res.writeHead(200, { ...headersFor(path), 'content-length': String(body.byteLength) });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    let file: string | undefined;
    for (const [prefix, dir] of mounts) {
      if (path.startsWith(prefix)) {
        file = contained(dir, path.slice(prefix.length));
        break;
      }
    }
    if (file === undefined && root !== undefined) file = contained(root, path.slice(1));
    const notFound = (): void => {
      // Chromium always asks for a favicon; a 404 would show up as a console error in every test.
      res.writeHead(path === '/favicon.ico' ? 204 : 404).end();
    };
    if (file === undefined) {
      notFound();
      return;
    }
    let info = await stat(file).catch(() => undefined);
    if (info?.isDirectory() === true) {
      file = join(file, 'index.html');
      info = await stat(file).catch(() => undefined);
    }
    if (info === undefined || !info.isFile()) {
      notFound();
      return;
    }
    res.writeHead(200, { ...headersFor(file), 'content-length': String(info.size) });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    createReadStream(file).pipe(res);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    // Port 0: the OS picks a free port, so parallel test files never collide.
    server.listen(0, '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    setFile(path, body) {
      files.set(path, body);
    },
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

/** Resolves a URL path under dir, or undefined if it would escape dir (../ tricks). */
function contained(dir: string, rel: string): string | undefined {
  const full = normalize(join(dir, rel));
  return full === dir || full.startsWith(dir + sep) ? full : undefined;
}

export interface BuildPageOptions {
  /** Directory holding the page's index.html (Vite's root). */
  root: string;
  /** HTML entry files relative to root; default ['index.html']. */
  pages?: readonly string[];
  /** Vite `define` replacements. */
  define?: Readonly<Record<string, string>>;
}

export interface BuiltPage {
  readonly outDir: string;
  /** Removes the temp build. */
  cleanup(): Promise<void>;
}

/**
 * Bundles a page with Vite into a fresh temp dir. Source maps are kept and minification is off so that stack traces
 * in captured console errors point at readable code.
 */
export async function buildPage(options: BuildPageOptions): Promise<BuiltPage> {
  const { build } = await import('vite');
  const root = resolve(options.root);
  const outDir = await mkdtemp(join(tmpdir(), 'meshtrain-page-'));
  const pages = options.pages ?? ['index.html'];
  const input = Object.fromEntries(
    pages.map((p) => [p.replace(/\.html$/, '').replace(/[\\/]/g, '_'), join(root, p)]),
  );
  try {
    await build({
      root,
      // The repo has no page-level vite config for tests; everything is stated here so builds are reproducible.
      configFile: false,
      logLevel: 'warn',
      base: '/',
      define: { ...options.define },
      build: {
        outDir,
        emptyOutDir: true,
        minify: false,
        sourcemap: true,
        target: 'esnext',
        // ORT's bundle is big; the warning is noise in test output.
        chunkSizeWarningLimit: 100_000,
        rolldownOptions: { input },
      },
    });
  } catch (err) {
    await rm(outDir, { recursive: true, force: true });
    throw err;
  }
  return { outDir, cleanup: () => rm(outDir, { recursive: true, force: true }) };
}
