// Maintenance of relay.db's write-ahead log off the relay's thread: SQLite's WAL checkpoint, which copies
// committed frames into the database file. With SQLite's automatic checkpoint, the commit that crosses 1,000
// WAL pages copies them into the database and fsyncs both files before it returns: 20–35 ms on this
// project's VMs, about every 4 MB written. At 1,000 clients the relay writes ~56 MB per round (results
// mostly), so that was a dozen stalls of the event loop every round, each delaying every socket and /healthz.
// Here a worker thread with its own connection checkpoints every second instead (PASSIVE: it never blocks
// the relay's writes), and the relay's connection never checkpoints itself. Durability is unchanged:
// committed transactions are in the WAL either way (synchronous = NORMAL), and a restart replays it.
import { Worker } from 'node:worker_threads';

export interface WalMaintenanceStats {
  passes: number;
  /** WAL frames copied into the database by the latest pass. */
  lastCheckpointed: number;
  errors: number;
}

export class WalMaintenance {
  readonly stats: WalMaintenanceStats = { passes: 0, lastCheckpointed: 0, errors: 0 };
  private readonly worker: Worker;
  private readonly waiters: (() => void)[] = [];
  private stopped = false;
  private readonly exited: Promise<void>;

  /** `onError` hears a failed pass (the next pass tries again); `onExit` a worker that died. */
  constructor(path: string, intervalMs: number, onError: (message: string) => void, onExit: () => void) {
    this.worker = new Worker(new URL('./wal-maintenance-worker.ts', import.meta.url), {
      workerData: { path, intervalMs },
    });
    // The relay's process must be able to exit while the worker idles between passes.
    this.worker.unref();
    this.worker.on('message', (m: { type: string; checkpointed?: number; message?: string }) => {
      if (m.type === 'pass') {
        this.stats.passes++;
        this.stats.lastCheckpointed = m.checkpointed ?? 0;
        for (const w of this.waiters.splice(0)) w();
      } else if (m.type === 'error') {
        this.stats.errors++;
        onError(m.message ?? 'unknown error');
      }
    });
    this.worker.on('error', (e) => onError(e.message));
    this.exited = new Promise((resolve) =>
      this.worker.on('exit', () => {
        for (const w of this.waiters.splice(0)) w();
        if (!this.stopped) onExit();
        resolve();
      }),
    );
  }

  /** Runs a pass now; resolves when it is done (or the worker is gone). */
  passNow(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.worker.postMessage('pass');
    });
  }

  /**
   * The worker closes its connection (a full checkpoint, if it is the last one) and ends. Until the returned
   * promise resolves its connection may still create and remove relay.db's -wal and -shm files.
   */
  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      // Held until it ends: its last checkpoint must finish, and a process awaiting it must not exit first.
      this.worker.ref();
      this.worker.postMessage('stop');
    }
    return this.exited;
  }
}
