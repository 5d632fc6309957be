// How late the relay's one thread runs its timers: a timer due every SAMPLE_MS records how much later than due
// it fired. Every client frame, tick and broadcast of every run shares this thread, so its delay is the
// relay's responsiveness (what a WebSocket reply or /healthz waits on top of its own work). On a machine
// busier than its cores, part of that delay is the OS running other processes; the thread's own CPU time over
// the late interval bounds the part the relay itself spent working, recorded beside it. One timer per process
// feeds the histograms of every registry that asked (tests run several relays in one process).
import type { Histogram, MetricsRegistry } from './registry.ts';

const SAMPLE_MS = 10;
/** Seconds; fine where the relay is healthy, coarse where it is not. */
const BOUNDS = [
  0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1, 2.5,
  5,
];

interface Pair {
  delay: WeakRef<Histogram>;
  busy: WeakRef<Histogram>;
}
const observers = new Set<Pair>();
let timer: NodeJS.Timeout | undefined;

/** This thread's CPU time in ms (all threads' where the runtime has no per-thread counter). */
function cpuMs(): number {
  const u = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function sample(): void {
  let due = performance.now() + SAMPLE_MS;
  let cpu = cpuMs();
  timer = setInterval(() => {
    const now = performance.now();
    const c = cpuMs();
    const lag = Math.max(0, now - due);
    // Of the lag, at most what the thread spent on the CPU since the last sample was its own work.
    const own = Math.min(lag, Math.max(0, c - cpu));
    due = now + SAMPLE_MS;
    cpu = c;
    for (const p of observers) {
      const d = p.delay.deref();
      const b = p.busy.deref();
      if (!d || !b) {
        observers.delete(p);
        continue;
      }
      d.observe(lag / 1000);
      b.observe(own / 1000);
    }
  }, SAMPLE_MS);
  timer.unref();
}

/** Registers the event-loop histograms in `registry` and keeps them fed. */
export function monitorEventLoop(registry: MetricsRegistry): { delay: Histogram; busy: Histogram } {
  const delay = registry.histogram(
    'meshtrain_event_loop_delay_seconds',
    `How late a ${SAMPLE_MS} ms timer of the relay's event loop fired (its lag).`,
    BOUNDS,
  );
  const busy = registry.histogram(
    'meshtrain_event_loop_busy_delay_seconds',
    "The part of each event-loop lag sample the relay's thread spent on the CPU (its own work; the rest was other processes).",
    BOUNDS,
  );
  observers.add({ delay: new WeakRef(delay), busy: new WeakRef(busy) });
  if (timer === undefined) sample();
  return { delay, busy };
}
