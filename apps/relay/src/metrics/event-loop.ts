// How late the relay's one thread runs its timers: a timer due every SAMPLE_MS records how much later than due
// it fired. Every client frame, tick and broadcast of every run shares this thread, so its delay is the
// relay's responsiveness (what a WebSocket reply or /healthz waits on top of its own work). One timer per
// process feeds the histogram of every registry that asked (tests run several relays in one process).
import type { Histogram, MetricsRegistry } from './registry.ts';

const SAMPLE_MS = 10;
/** Seconds; fine where the relay is healthy, coarse where it is not. */
const BOUNDS = [
  0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1, 2.5,
  5,
];

const observers = new Set<WeakRef<Histogram>>();
let timer: NodeJS.Timeout | undefined;

function sample(): void {
  let due = performance.now() + SAMPLE_MS;
  timer = setInterval(() => {
    const now = performance.now();
    const lag = Math.max(0, now - due) / 1000;
    due = now + SAMPLE_MS;
    for (const ref of observers) {
      const h = ref.deref();
      if (h) h.observe(lag);
      else observers.delete(ref);
    }
  }, SAMPLE_MS);
  timer.unref();
}

/** Registers meshtrain_event_loop_delay_seconds in `registry` and keeps it fed. */
export function monitorEventLoop(registry: MetricsRegistry): Histogram {
  const delay = registry.histogram(
    'meshtrain_event_loop_delay_seconds',
    `How late a ${SAMPLE_MS} ms timer of the relay's event loop fired (its lag).`,
    BOUNDS,
  );
  observers.add(new WeakRef(delay));
  if (timer === undefined) sample();
  return delay;
}
