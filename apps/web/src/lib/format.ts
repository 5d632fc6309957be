// Small display helpers shared by the pages.

export function shortKey(hex: string, n = 8): string {
  return hex.length <= 2 * n ? hex : `${hex.slice(0, n)}…${hex.slice(-4)}`;
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v.toFixed(0) : v.toFixed(1)} ${units[i]}`;
}

/** Tokens per second, e.g. "1,234 tok/s" ("–" for none). */
export function formatTokensPerSec(x: number | null | undefined): string {
  return x === null || x === undefined || !Number.isFinite(x)
    ? '–'
    : `${x.toLocaleString('en-US', { maximumFractionDigits: x < 10 ? 1 : 0 })} tok/s`;
}

/** Bytes per second, e.g. "12.5 KiB/s" ("–" for none). */
export function formatRate(bytesPerSec: number | null | undefined): string {
  return bytesPerSec === null || bytesPerSec === undefined || !Number.isFinite(bytesPerSec)
    ? '–'
    : `${formatBytes(bytesPerSec)}/s`;
}

export function formatAgo(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(ms).toLocaleString();
}

export function formatLoss(x: number | null | undefined): string {
  return x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(3);
}

/** Human words for the coordinator's phases. */
export const PHASE_WORDS: Readonly<Record<string, string>> = {
  Uninitialized: 'not started',
  WaitingForMembers: 'waiting for volunteers',
  Warmup: 'warming up (loading the model)',
  RoundTrain: 'training a round',
  RoundWitness: 'witnesses confirming results',
  Cooldown: 'end of epoch (checkpoint)',
  Finished: 'finished',
  Paused: 'paused by the run creator',
};

export function phaseWords(state: string): string {
  return PHASE_WORDS[state] ?? state;
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
