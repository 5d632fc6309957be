// Knowing when an in-process run is idle (virtual-time.ts moves time only then). ONNX calls go through
// SharedOrt's queue; a DisTrO backend on a GPU does its work between a call and the promise it returns (a
// readback waits on the device), which the event loop does not see as pending work — so its promises are
// counted here.
import type { DistroBackend } from '@meshtrain/distro';

export type Busy = () => Promise<void> | null;

export class PendingWork {
  private pending = new Set<Promise<unknown>>();
  /** Seconds from call to settled promise, and calls, per operation name. */
  readonly seconds = new Map<string, { seconds: number; calls: number }>();

  track<T>(p: Promise<T>, name = 'work'): Promise<T> {
    const t0 = performance.now();
    this.pending.add(p);
    const done = () => {
      this.pending.delete(p);
      const s = this.seconds.get(name) ?? { seconds: 0, calls: 0 };
      s.seconds += (performance.now() - t0) / 1000;
      s.calls++;
      this.seconds.set(name, s);
    };
    p.then(done, done);
    return p;
  }

  readonly busy: Busy = () =>
    this.pending.size > 0 ? Promise.allSettled([...this.pending]).then(() => {}) : null;
}

/** `d` with every promise it returns counted in `work`. */
export function tracked(d: DistroBackend, work: PendingWork): DistroBackend {
  return new Proxy(d, {
    get(target, key) {
      const v = Reflect.get(target, key, target) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const out = (v as (...a: unknown[]) => unknown).apply(target, args);
        return out instanceof Promise ? work.track(out, String(key)) : out;
      };
    },
  });
}

/** Busy while any of `sources` is. */
export function anyBusy(...sources: Busy[]): Busy {
  return () => {
    const pending = sources.map((b) => b()).filter((p): p is Promise<void> => p !== null);
    return pending.length > 0 ? Promise.all(pending).then(() => {}) : null;
  };
}
