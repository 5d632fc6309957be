// Held-out evaluations during training: the loss of the parameters as they are at a model load or an epoch
// end, on samples nobody trains on. Evaluations queue behind each other and never block the client.
import type { Client } from '@meshtrain/client';
import type { TrainerBackend } from '../net/trainer.ts';
import type { Output } from './options.ts';
import type { EvalTokens } from './setup.ts';

export class Evaluator {
  /** The latest held-out loss, or null before the first evaluation. */
  last: number | null = null;
  private readonly io: Output;
  private readonly tokens: EvalTokens | null;
  private readonly seqLen: number;
  private queue: Promise<void> = Promise.resolve();
  private target: { client: Client; backend: TrainerBackend } | null = null;

  constructor(io: Output, tokens: EvalTokens | null, seqLen: number) {
    this.io = io;
    this.tokens = tokens;
    this.seqLen = seqLen;
  }

  /** The client and backend to evaluate (created after the event handler that schedules evaluations). */
  attach(client: Client, backend: TrainerBackend): void {
    this.target = { client, backend };
  }

  /** Queues an evaluation of the parameters as they are when it runs, labelled with `step`. */
  schedule(step: number): void {
    if (!this.tokens) return;
    this.queue = this.queue.then(() => this.evaluate(step));
  }

  /** Resolves once every queued evaluation ran. */
  done(): Promise<void> {
    return this.queue;
  }

  private async evaluate(step: number): Promise<void> {
    const ev = this.tokens;
    if (!ev || !this.target) return;
    const { client, backend } = this.target;
    const params = await client.parameters();
    const w = this.seqLen + 1;
    let sum = 0;
    let rows = 0;
    for (let r = 0; r < ev.rows; r += backend.maxRows) {
      const n = Math.min(backend.maxRows, ev.rows - r);
      sum += (await backend.evalLoss(ev.tokens.subarray(r * w, (r + n) * w), n, params)) * n;
      rows += n;
    }
    this.last = sum / rows;
    this.io.out({ type: 'eval', step, val_loss: this.last, samples: rows });
    if (!this.io.json)
      process.stderr.write(`\r\x1b[Kheld-out loss ${this.last.toFixed(4)} at step ${step}\n`);
  }
}
