// Runs a checkpoint job (encode-worker.ts) in a worker thread, one job at a time for the whole relay: a job
// holds a few copies of a model in memory, so two 125M-parameter jobs at once would double the peak for no
// gain on a relay whose other work is light. The event loop only waits for the answer.
import { Worker } from 'node:worker_threads';
import type { CheckpointJob, EncodedJob, JobReply } from './encode-worker.ts';

export type { CheckpointJob, EncodedJob } from './encode-worker.ts';

/** A checkpoint that does not decode for the run's model (a client error, 400). */
export class BadCheckpointError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'BadCheckpointError';
    this.reason = reason;
  }
}

const WORKER_URL = new URL('./encode-worker.ts', import.meta.url);
let queue: Promise<unknown> = Promise.resolve();

/**
 * Settles when the worker has exited, not when it answers: it ends by itself once it has posted its reply, so
 * nothing terminates it, and the next job's worker starts only after this one is gone. Node's worker_threads
 * has an open segfault when one worker is torn down while another starts; the relay never does that.
 */
function once(job: CheckpointJob): Promise<EncodedJob> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, { workerData: job });
    let reply: JobReply | undefined;
    let failure: Error | undefined;
    worker.once('message', (r: JobReply) => (reply = r));
    worker.once('error', (err) => (failure = err));
    worker.once('exit', (code) => {
      if (failure) reject(failure);
      else if (!reply) reject(new Error(`checkpoint worker exited with ${code} before answering`));
      else if (reply.ok) resolve(reply.result);
      else if (reply.code === 'bad_checkpoint') reject(new BadCheckpointError(reply.reason, reply.message));
      else reject(new Error(`checkpoint worker: ${reply.message}`));
    });
  });
}

/** Runs `job` off the event loop, after every job queued before it. */
export function runCheckpointJob(job: CheckpointJob): Promise<EncodedJob> {
  const next = queue.then(
    () => once(job),
    () => once(job),
  );
  queue = next.catch(() => undefined);
  return next;
}
