// Peak GPU memory of a child process, where the machine has an NVIDIA driver: nvidia-smi's used memory of
// the device, sampled while the child runs, minus what was used before it started. Neither ORT's WebGPU EP
// nor Dawn reports its allocations, so this is the one measure that covers every backend alike (it includes
// the driver's context and any other process on the card; the report says so).
import { execFileSync, spawn } from 'node:child_process';

function usedMiB(): number | null {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    });
    const first = Number(out.trim().split('\n')[0]);
    return Number.isFinite(first) ? first : null;
  } catch {
    return null;
  }
}

/** The GPU's name per nvidia-smi, or null when there is no NVIDIA driver. */
export function nvidiaGpuName(): string | null {
  try {
    return (
      execFileSync('nvidia-smi', ['--query-gpu=name,memory.total', '--format=csv,noheader'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 5000,
      })
        .trim()
        .split('\n')[0] ?? null
    );
  } catch {
    return null;
  }
}

export interface GpuMemorySampler {
  /** Call periodically while the measured process runs. */
  sample(): void;
  /** Peak used minus the baseline, MiB; null without nvidia-smi. */
  peakMiB(): number | null;
}

/** A sampler whose baseline is the memory in use now; inert (always null) without nvidia-smi. */
export function gpuMemorySampler(): GpuMemorySampler {
  const base = usedMiB();
  let peak = base;
  let pending = false;
  return {
    sample() {
      if (base === null || pending) return;
      // Asynchronous, so sampling never blocks the event loop that is collecting the child's output.
      pending = true;
      const p = spawn('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], {
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let out = '';
      p.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      p.on('error', () => (pending = false));
      p.on('close', () => {
        pending = false;
        const v = Number(out.trim().split('\n')[0]);
        if (Number.isFinite(v) && (peak === null || v > peak)) peak = v;
      });
    },
    peakMiB: () => (base === null || peak === null ? null : peak - base),
  };
}
