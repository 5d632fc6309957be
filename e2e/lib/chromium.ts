// Launches Debian's Chromium (never a Playwright-downloaded build: CI is offline) headless, with or without WebGPU.
//
// WebGPU here is SwiftShader (CPU-emulated Vulkan): headless Chromium on a machine without a GPU exposes no adapter
// unless it is told that a software adapter is acceptable (--enable-unsafe-swiftshader) and that WebGPU may run
// outside Chrome's GPU blocklist/origin-trial rules (--enable-unsafe-webgpu); Dawn's SwiftShader path sits behind
// the Vulkan feature. The "no WebGPU" mode stands in for a browser whose GPU is blocklisted or absent.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

/** Debian's Chromium; override with MESHTRAIN_CHROMIUM for a different local browser. */
export const CHROMIUM_PATH = process.env.MESHTRAIN_CHROMIUM ?? '/usr/bin/chromium';

/** Flags every launch gets: no sandbox (CI runs as root in containers), no traffic to Google's services. */
export const BASE_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/**
 * Flags that give WebGPU on SwiftShader in headless Chromium (verified on Chromium 156, see
 * docs/architecture.md "Runtime notes").
 */
export const WEBGPU_ARGS: readonly string[] = [
  '--enable-unsafe-webgpu',
  '--enable-unsafe-swiftshader',
  '--enable-features=Vulkan',
];

/**
 * Flags for the "browser without WebGPU" mode. Without the unsafe flags headless Chromium already finds no adapter,
 * but turning the feature off makes that independent of the machine (a real GPU would otherwise be picked up).
 */
export const NO_WEBGPU_ARGS: readonly string[] = ['--disable-features=WebGPU,Vulkan'];

/**
 * WebRTC with plain host candidates: Chromium hides local IPs behind mDNS names (`….local`) unless the page
 * may capture media, and neither libjuice (Node peers) nor a namespace without multicast resolves those. Test
 * and dev setups only: it tells every page this machine's addresses.
 */
export const WEBRTC_HOST_CANDIDATE_ARGS: readonly string[] = [
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

/**
 * Chromium honours only one `--enable-features` and one `--disable-features` switch; merges them so option
 * sets (WebGPU, WebRTC, the caller's) combine.
 */
export function mergeFeatureFlags(args: readonly string[]): string[] {
  const lists = { enable: [] as string[], disable: [] as string[] };
  const rest: string[] = [];
  for (const a of args) {
    const m = /^--(enable|disable)-features=(.*)$/.exec(a);
    if (m) lists[m[1] as 'enable' | 'disable'].push(...(m[2] as string).split(',').filter((f) => f !== ''));
    else rest.push(a);
  }
  for (const kind of ['enable', 'disable'] as const)
    if (lists[kind].length > 0) rest.push(`--${kind}-features=${[...new Set(lists[kind])].join(',')}`);
  return rest;
}

export interface LaunchOptions {
  /** true: WebGPU on SwiftShader; false: navigator.gpu yields no adapter (the "no WebGPU" explanation scenario). */
  webgpu: boolean;
  /** Reuse a profile (e.g. to test a reload that must find IndexedDB state); default: a fresh temp dir. */
  userDataDir?: string;
  /** Extra Chromium flags appended after ours. */
  args?: readonly string[];
  /** Run headed (needs a display); default headless. */
  headed?: boolean;
  /** Another Chromium executable, e.g. a test namespace's wrapper (netns.ts); default CHROMIUM_PATH. */
  executablePath?: string;
  /** Gather plain host ICE candidates (WEBRTC_HOST_CANDIDATE_ARGS), for WebRTC tests in a namespace. */
  webrtcHostCandidates?: boolean;
}

export interface LaunchedChromium {
  readonly context: BrowserContext;
  readonly userDataDir: string;
  readonly webgpu: boolean;
  newPage(): Promise<Page>;
  /** Closes the browser and removes the profile dir if this launch created it. */
  close(): Promise<void>;
}

export async function launchChromium(options: LaunchOptions): Promise<LaunchedChromium> {
  const ownsProfile = options.userDataDir === undefined;
  const userDataDir = options.userDataDir ?? (await mkdtemp(join(tmpdir(), 'meshtrain-chromium-')));
  const args = mergeFeatureFlags([
    ...BASE_ARGS,
    ...(options.webgpu ? WEBGPU_ARGS : NO_WEBGPU_ARGS),
    ...(options.webrtcHostCandidates === true ? WEBRTC_HOST_CANDIDATE_ARGS : []),
    ...(options.args ?? []),
  ]);
  const executablePath = options.executablePath ?? CHROMIUM_PATH;
  let context: BrowserContext;
  try {
    // A persistent context, because only it takes an explicit profile dir: scenarios that reload a tab and expect
    // IndexedDB (Dexie) state to survive need to control where that state lives.
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      headless: options.headed !== true,
      args,
      viewport: { width: 1280, height: 800 },
    });
  } catch (err) {
    if (ownsProfile) await rm(userDataDir, { recursive: true, force: true });
    throw new Error(
      `could not launch Chromium at ${executablePath} (install Debian's "chromium" package or set MESHTRAIN_CHROMIUM): ${String(err)}`,
      { cause: err },
    );
  }
  let closed = false;
  return {
    context,
    userDataDir,
    webgpu: options.webgpu,
    newPage: () => context.newPage(),
    async close() {
      if (closed) return;
      closed = true;
      await context.close();
      if (ownsProfile) await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

export interface WebGpuProbe {
  /** navigator.gpu exists (the API is exposed in this context). */
  api: boolean;
  /** requestAdapter() gave an adapter. */
  adapter: boolean;
  /** GPUAdapterInfo fields when an adapter was found. */
  info?: { vendor: string; architecture: string; device: string; description: string };
  /** Whether the adapter reports itself as a fallback (software) adapter. */
  isFallbackAdapter?: boolean;
}

/** Asks the page what WebGPU it has. The page must be on a secure context (http://127.0.0.1 counts). */
export async function probeWebGpu(page: Page): Promise<WebGpuProbe> {
  return page.evaluate(async () => {
    const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
    if (gpu === undefined) return { api: false, adapter: false };
    const adapter = await gpu.requestAdapter();
    if (adapter === null) return { api: true, adapter: false };
    const i = adapter.info;
    return {
      api: true,
      adapter: true,
      info: { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description },
      isFallbackAdapter: (i as GPUAdapterInfo & { isFallbackAdapter?: boolean }).isFallbackAdapter ?? false,
    };
  });
}

/** Fails with a message that says what to fix when the page has no WebGPU adapter. */
export async function requireWebGpu(page: Page): Promise<WebGpuProbe> {
  const probe = await probeWebGpu(page);
  if (!probe.api) {
    throw new Error(
      'WebGPU unavailable: navigator.gpu is undefined. Launch with launchChromium({webgpu: true}) ' +
        `(flags ${WEBGPU_ARGS.join(' ')}) and load the page from http://127.0.0.1 (a secure context).`,
    );
  }
  if (!probe.adapter) {
    throw new Error(
      'WebGPU unavailable: navigator.gpu.requestAdapter() returned null. Chromium needs ' +
        `${WEBGPU_ARGS.join(' ')} to use SwiftShader, and the Vulkan loader (Debian package libvulkan1) must be installed.`,
    );
  }
  return probe;
}
