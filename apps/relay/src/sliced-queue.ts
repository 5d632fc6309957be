// Work that arrives in bursts, done in slices. A round's results reach the relay from every client within a
// second or two, and Node runs the handlers of every socket that has data in one go: a thousand results
// (~1 ms each: signature, commitment, SQLite) would hold the thread for a second, and with it every timer,
// /healthz and the other runs. Jobs queued here (inbound frames, a broadcast's sends in chunks) run in FIFO
// order, at most SLICE_MS of them per event-loop turn; timers and new I/O run in between.
export class SlicedQueue {
  private jobs: ((() => void) | undefined)[] = [];
  private head = 0;
  private scheduled = false;
  private readonly sliceMs: number;
  private readonly onError: (e: unknown) => void;

  constructor(sliceMs: number, onError: (e: unknown) => void) {
    this.sliceMs = sliceMs;
    this.onError = onError;
  }

  get length(): number {
    return this.jobs.length - this.head;
  }

  push(job: () => void): void {
    this.jobs.push(job);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.drain);
  }

  private readonly drain = (): void => {
    const end = performance.now() + this.sliceMs;
    do {
      const job = this.jobs[this.head];
      this.jobs[this.head++] = undefined;
      try {
        job?.();
      } catch (e) {
        this.onError(e);
      }
    } while (this.head < this.jobs.length && performance.now() < end);
    if (this.head < this.jobs.length) {
      if (this.head > 4096 && this.head * 2 > this.jobs.length) {
        this.jobs = this.jobs.slice(this.head);
        this.head = 0;
      }
      setImmediate(this.drain);
      return;
    }
    this.jobs = [];
    this.head = 0;
    this.scheduled = false;
  };
}
