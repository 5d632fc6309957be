// Node side of the scenario protocol (see page-runtime.ts for the page side).
import type { Page } from 'playwright-core';
import { SCENARIOS_GLOBAL } from './page-runtime.ts';
import type { ScenarioOutcome } from './page-runtime.ts';

/** Navigates to url and waits until the page has registered its scenarios (its module finished loading). */
export async function openScenarioPage(page: Page, url: string, timeoutMs = 60_000): Promise<void> {
  await page.goto(url);
  try {
    await page.waitForFunction((key) => key in globalThis, SCENARIOS_GLOBAL, { timeout: timeoutMs });
  } catch (err) {
    throw new Error(
      `page ${url} did not register its scenarios within ${timeoutMs} ms (module failed to load? check console errors)`,
      { cause: err },
    );
  }
}

/** Runs a named scenario in the page with JSON args; rethrows page-side failures with the page's stack. */
export async function runScenario<T>(page: Page, name: string, args: unknown = {}): Promise<T> {
  const outcome = await page.evaluate(
    async ({ key, name, args }): Promise<ScenarioOutcome> => {
      const table = (globalThis as Record<string, unknown>)[key] as
        Record<string, (a: unknown) => Promise<unknown>> | undefined;
      const fn = table?.[name];
      if (fn === undefined) return { ok: false, error: `no scenario named "${name}" on this page` };
      try {
        return { ok: true, value: await fn(args) };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
      }
    },
    { key: SCENARIOS_GLOBAL, name, args },
  );
  if (!outcome.ok) throw new Error(`scenario "${name}" failed in the page:\n${outcome.error}`);
  return outcome.value as T;
}

/** Decodes page-side toBase64() output into a typed array of the given kind (bytes are little-endian). */
export function fromBase64<T extends Float32Array | Float64Array | Int32Array | Uint8Array>(
  b64: string,
  kind: new (buffer: ArrayBuffer) => T,
): T {
  const buf = Buffer.from(b64, 'base64');
  // Copy into a fresh, aligned ArrayBuffer: Buffer's pool offset need not be a multiple of the element size.
  const ab = new ArrayBuffer(buf.byteLength);
  new Uint8Array(ab).set(buf);
  return new kind(ab);
}
