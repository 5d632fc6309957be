// Browser side of the scenario protocol. A test page imports this, registers named async scenarios, and the Node
// side (scenario.ts) calls them through page.evaluate. Only JSON crosses the boundary; binary data goes as base64.
// This module must stay free of Node imports: it is bundled into pages.

/** The global the page's scenario table lives under. */
export const SCENARIOS_GLOBAL = '__meshtrainScenarios';

export type Scenario = (args: never) => Promise<unknown>;

/** What runScenario receives: errors are returned as data so the page-side stack survives the trip. */
export type ScenarioOutcome = { ok: true; value: unknown } | { ok: false; error: string };

export function registerScenarios(scenarios: Readonly<Record<string, Scenario>>): void {
  (globalThis as Record<string, unknown>)[SCENARIOS_GLOBAL] = scenarios;
}

/** Little-endian bytes of a typed array (or raw bytes) as base64; chunked because String.fromCharCode has arg limits. */
export function toBase64(data: ArrayBufferView | ArrayBuffer): string {
  const bytes =
    data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Fetches a served file as bytes, failing loudly on 404 (a missing file would otherwise surface as a parse error). */
export async function fetchBytes(path: string): Promise<Uint8Array> {
  const res = await fetch(path);
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}
