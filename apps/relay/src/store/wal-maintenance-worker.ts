// The WAL maintenance thread (wal-maintenance.ts): its own connection to relay.db, which copies committed
// WAL frames into the database file every interval. PASSIVE never waits for the relay's thread and never
// makes it wait: frames a reader still needs are simply left for the next pass.
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

interface Options {
  path: string;
  intervalMs: number;
}

const { path, intervalMs } = workerData as Options;
const db = new DatabaseSync(path);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

function pass(): void {
  try {
    const r = checkpoint.get() as { busy: number; log: number; checkpointed: number };
    parentPort?.postMessage({ type: 'pass', log: r.log, checkpointed: r.checkpointed });
  } catch (e) {
    parentPort?.postMessage({ type: 'error', message: (e as Error).message });
  }
}

const timer = setInterval(pass, intervalMs);
parentPort?.on('message', (m: unknown) => {
  if (m === 'pass') pass();
  if (m === 'stop') {
    clearInterval(timer);
    // The last connection to close checkpoints the whole WAL and removes it.
    db.close();
    parentPort?.close();
  }
});
parentPort?.postMessage({ type: 'ready' });
