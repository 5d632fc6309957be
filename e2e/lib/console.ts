// Collects what a page says on its console and what it throws, so tests can fail on errors they did not expect.
import type { ConsoleMessage, Page } from 'playwright-core';
import { ortSeverity } from './ort-log.ts';

export interface ConsoleEntry {
  type: string;
  text: string;
  /** url:line of the call site, when Chromium reports one. */
  location: string;
}

export interface ConsoleLog {
  readonly entries: readonly ConsoleEntry[];
  /** Uncaught exceptions and unhandled rejections in the page. */
  readonly pageErrors: readonly string[];
  /**
   * console.error messages plus page errors. onnxruntime's verbose/info/warning lines are not counted although
   * they arrive as console.error (its wasm logs to stderr); its E/F lines are.
   */
  errors(): string[];
  /**
   * WebGPU validation / device-lost reports. Chromium prints an uncaptured GPUError as a console warning (not an
   * error), so these are matched by content rather than by message type.
   */
  gpuErrors(): string[];
  /** Everything, one line per entry, for writing to an artifact. */
  dump(): string;
  /** Stops listening. */
  detach(): void;
}

// Shapes of Dawn/Chromium WebGPU diagnostics. Dawn ends every validation message with its call chain
// (" - While calling [Device].CreateBindGroup(...)", " - While validating ..."); other forms: "[Buffer "x"] is
// invalid", "Device was lost", and Chromium's cut-off notice after too many such messages.
const GPU_ERROR =
  /\bWhile (calling|validating|encoding|finishing)\b|\b(validation error|is invalid|device (was )?lost|GPUValidationError|GPUOutOfMemoryError|GPUInternalError|too many warnings, no more warnings will be reported)\b|^\s*\[(Buffer|Texture|BindGroup|BindGroupLayout|PipelineLayout|ComputePipeline|RenderPipeline|ShaderModule|CommandEncoder|ComputePassEncoder|CommandBuffer|Queue|Device|QuerySet|Sampler)\b/i;

export function isGpuError(text: string): boolean {
  return GPU_ERROR.test(text);
}

/** A console.error that is a real error (not one of ORT's V/I/W lines routed to stderr). */
export function isErrorEntry(entry: ConsoleEntry): boolean {
  if (entry.type !== 'error') return false;
  const sev = ortSeverity(entry.text);
  return sev === undefined || sev === 'E' || sev === 'F';
}

export function collectConsole(page: Page): ConsoleLog {
  const entries: ConsoleEntry[] = [];
  const pageErrors: string[] = [];
  const onConsole = (msg: ConsoleMessage): void => {
    const loc = msg.location();
    entries.push({
      type: msg.type(),
      text: msg.text(),
      location: loc.url === '' ? '' : `${loc.url}:${loc.lineNumber}`,
    });
  };
  const onPageError = (err: Error): void => {
    pageErrors.push(err.stack ?? `${err.name}: ${err.message}`);
  };
  page.on('console', onConsole);
  page.on('pageerror', onPageError);
  return {
    entries,
    pageErrors,
    errors: () => [...entries.filter(isErrorEntry).map((e) => e.text), ...pageErrors],
    gpuErrors: () => entries.filter((e) => isGpuError(e.text)).map((e) => e.text),
    dump: () =>
      [
        ...entries.map((e) => `[${e.type}] ${e.text}${e.location === '' ? '' : `  (${e.location})`}`),
        ...pageErrors.map((e) => `[pageerror] ${e}`),
      ].join('\n'),
    detach() {
      page.off('console', onConsole);
      page.off('pageerror', onPageError);
    },
  };
}
