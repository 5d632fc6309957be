// Progress lines for long benchmark loops: node-trainer's Progress on stderr, one plain line every `every`
// steps (and the final one), each with its ETA — readable in a log, unlike a redrawn bar.
import { Progress } from '../../apps/node-trainer/src/progress/index.ts';

export class StepProgress extends Progress {
  private readonly every: number;
  private last = -1;

  constructor(label: string, total: number, every: number) {
    super(label, total, {
      intervalMs: 0,
      stream: { isTTY: false, write: (s: string) => process.stderr.write(s) },
    });
    this.every = every;
  }

  override update(done: number, detail = ''): void {
    if (done === this.last || done % this.every !== 0) return;
    this.last = done;
    super.update(done, detail);
  }
}
