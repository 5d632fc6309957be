// Progress for long CLI work, on stderr so stdout stays clean for JSON. On a terminal: one bar redrawn
// in place. Otherwise (CI logs, pipes): a plain line at most every `intervalMs`, plus the final one.

/** Plain-text lines at most this often: a log stays readable over an hour of work. */
const PRINT_INTERVAL_MS = 2000;

export interface ProgressOptions {
  /** Where to draw; defaults to process.stderr. */
  stream?: NodeJS.WriteStream | { isTTY?: boolean; write(s: string): boolean; columns?: number };
  /** Minimum time between plain-text lines. */
  intervalMs?: number;
  /** Formats the done/total numbers (e.g. as MB). */
  format?: (n: number) => string;
}

export class Progress {
  private readonly label: string;
  private readonly total: number;
  private readonly stream: NonNullable<ProgressOptions['stream']>;
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private readonly format: (n: number) => string;
  private readonly started = Date.now();
  private lastPrint = 0;
  private done = 0;
  private finished = false;

  constructor(label: string, total: number, options: ProgressOptions = {}) {
    this.label = label;
    this.total = Math.max(0, total);
    this.stream = options.stream ?? process.stderr;
    this.tty = Boolean(this.stream.isTTY);
    this.intervalMs = options.intervalMs ?? PRINT_INTERVAL_MS;
    this.format = options.format ?? ((n) => String(n));
  }

  /** Sets the amount done (absolute) and redraws if due. */
  update(done: number, detail = ''): void {
    this.done = Math.min(done, this.total);
    const now = Date.now();
    if (this.tty ? now - this.lastPrint >= 100 : now - this.lastPrint >= this.intervalMs) {
      this.lastPrint = now;
      this.draw(detail);
    }
  }

  /** Final line (always printed, ends with a newline). */
  finish(detail = ''): void {
    if (this.finished) return;
    this.finished = true;
    this.done = this.total;
    this.draw(detail);
    if (this.tty) this.stream.write('\n');
  }

  private draw(detail: string): void {
    const frac = this.total > 0 ? this.done / this.total : 1;
    const pct = `${(frac * 100).toFixed(0).padStart(3)}%`;
    const secs = (Date.now() - this.started) / 1000;
    const eta = frac > 0 && frac < 1 ? ` eta ${((secs / frac) * (1 - frac)).toFixed(0)}s` : '';
    const counts = `${this.format(this.done)}/${this.format(this.total)}`;
    const tail = `${pct} ${counts} ${secs.toFixed(1)}s${eta}${detail ? ` ${detail}` : ''}`;
    if (this.tty) {
      const width = Math.max(
        10,
        Math.min(40, (this.stream.columns ?? 80) - this.label.length - tail.length - 6),
      );
      const filled = Math.round(frac * width);
      this.stream.write(
        `\r\x1b[2K${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${tail}`,
      );
    } else this.stream.write(`${this.label}: ${tail}\n`);
  }
}
