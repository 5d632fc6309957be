// Benchmarks that run each case in a child process of their own (so a case's peak RSS is its own): the child
// prints one JSON object on stdout; the parent gets it back, or the last lines of the child's stderr.
import { spawn } from 'node:child_process';
import { cpus } from 'node:os';
import * as ort from 'onnxruntime-node';

export type ChildOutcome<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Runs `command args`, parses its stdout as one JSON object. `tick` is called every `tickMs` while it runs
 * (e.g. to sample GPU memory). Never throws: a crash, a non-zero exit or unparsable output is an error.
 */
export function runJsonChild<T>(
  command: string,
  args: string[],
  o: { tick?: () => void; tickMs?: number; input?: string } = {},
): Promise<ChildOutcome<T>> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env: process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    // A child that exits without reading its input must not crash the parent with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(o.input ?? '');
    const timer = o.tick ? setInterval(o.tick, o.tickMs ?? 200) : undefined;
    const finish = (status: number | null, spawnError?: Error) => {
      if (timer) clearInterval(timer);
      try {
        if (spawnError) throw spawnError;
        const value = JSON.parse(stdout.trim().split('\n').pop() ?? '') as T;
        if (status !== 0) throw new Error(`exit ${status}`);
        resolve({ ok: true, value });
      } catch (err) {
        const tail = stderr.trim().split('\n').slice(-3).join(' | ');
        resolve({ ok: false, error: tail || `${(err as Error).message}: ${stdout.slice(-300)}` });
      }
    };
    child.on('error', (err) => finish(null, err));
    child.on('close', (status) => finish(status));
  });
}

/** This process's peak resident set so far, in bytes (getrusage's maxrss). */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024; // kB → bytes
}

export const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** What every benchmark report says about the machine it ran on. */
export function machineInfo() {
  return {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    node: process.versions.node,
    onnxruntime: ort.env.versions.node ?? 'unknown',
  };
}
