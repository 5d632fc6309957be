// The page's own WebGPU check, done before anything else so a browser without WebGPU gets an explanation
// (components/WebGpuHelp.svelte) instead of an error.

export type WebGpuSupport =
  | { kind: 'checking' }
  | { kind: 'ok'; adapter: string; fallback: boolean }
  | { kind: 'insecure' }
  | { kind: 'no-api' }
  | { kind: 'no-adapter' }
  | { kind: 'error'; message: string };

export async function checkWebGpu(): Promise<WebGpuSupport> {
  if (!isSecureContext) return { kind: 'insecure' };
  const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
  if (gpu === undefined) return { kind: 'no-api' };
  try {
    const adapter = await gpu.requestAdapter();
    if (adapter === null) return { kind: 'no-adapter' };
    const i = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
    const name = [i.vendor, i.architecture, i.device, i.description].filter((s) => s !== '').join(' ');
    return { kind: 'ok', adapter: name || 'unnamed adapter', fallback: i.isFallbackAdapter ?? false };
  } catch (e) {
    return { kind: 'error', message: e instanceof Error ? e.message : String(e) };
  }
}

/** Browser family and major version from the user agent, for version-specific advice. */
export function browserInfo(ua = navigator.userAgent): { name: string; major: number | null; os: string } {
  const edge = /Edg\/(\d+)/.exec(ua);
  const chrome = /Chrom(?:e|ium)\/(\d+)/.exec(ua);
  const firefox = /Firefox\/(\d+)/.exec(ua);
  const safari = /Version\/(\d+).*Safari/.exec(ua);
  const os = /Windows/.test(ua)
    ? 'Windows'
    : /Android/.test(ua)
      ? 'Android'
      : /Mac OS X|Macintosh/.test(ua)
        ? 'macOS'
        : /Linux|X11/.test(ua)
          ? 'Linux'
          : 'unknown';
  const pick = (name: string, m: RegExpExecArray | null) => ({
    name,
    major: m?.[1] ? Number(m[1]) : null,
    os,
  });
  if (edge) return pick('Edge', edge);
  if (chrome) return pick('Chrome', chrome);
  if (firefox) return pick('Firefox', firefox);
  if (safari) return pick('Safari', safari);
  return { name: 'your browser', major: null, os };
}
