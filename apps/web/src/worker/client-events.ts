// What the training worker makes of its client's events: counters and log lines for the page, the phase
// sentence, and the parameters of every epoch end kept in this browser.
import type { ClientEvent } from '@meshtrain/client';
import type { CoordinatorState } from '@meshtrain/core';
import type { StatusReporter } from './status-reporter.ts';

export interface ClientEventContext {
  reporter: StatusReporter;
  /** Parameters of the run's model (fp32 gradient bytes per optimizer step = 4 × this). */
  parameterCount: number;
  /** The coordinator state the session saw last (null before the first). */
  lastState: () => CoordinatorState | null;
  /** Keeps the parameters of an epoch end (step, epoch, hash) in this browser; rejects on failure. */
  cacheParameters: (step: number, epoch: number, hash: string) => Promise<void>;
  post: (m: { type: 'error'; where: string; message: string }) => void;
}

export function describeState(s: CoordinatorState | null): string {
  if (!s) return 'connecting to the run…';
  return `${s.run_state}, epoch ${s.progress.epoch}, step ${s.progress.step}/${s.config.total_steps}`;
}

function modelLine(e: Extract<ClientEvent, { type: 'model' }>): string {
  const from =
    e.source === 'init'
      ? 'initialised from the run seed'
      : e.source === 'checkpoint'
        ? `loaded from a checkpoint${e.via ? ` (${e.via})` : ''}`
        : 'kept';
  return `model ${from} at step ${e.step}${e.hash ? ` (hash ${e.hash.slice(0, 16)}…)` : ''}`;
}

function onTrained(ctx: ClientEventContext, e: Extract<ClientEvent, { type: 'trained' }>): void {
  const stats = ctx.reporter.status.stats;
  stats.batches++;
  stats.losses = [...stats.losses.slice(-499), { step: e.step, loss: e.loss }];
  stats.resultBytes += e.bytes;
  // An fp32 data-parallel peer sends one gradient per optimizer step; a SparseLoCo result covers several.
  stats.rawGradientBytes += ctx.parameterCount * 4 * e.innerSteps;
  ctx.reporter.log(
    `trained step ${e.step}: loss ${e.loss.toFixed(4)}, result ${e.bytes} B, ${e.seconds.toFixed(1)} s`,
  );
}

/** The handler a session's Client reports to. */
export function clientEventHandler(ctx: ClientEventContext): (e: ClientEvent) => void {
  const { reporter } = ctx;
  return (e) => {
    switch (e.type) {
      case 'trained':
        onTrained(ctx, e);
        break;
      case 'phase': {
        const phase = reporter.status.phase;
        if (phase === 'connecting' || phase === 'training')
          reporter.setPhase(
            'training',
            `Contributing: ${e.phase.toLowerCase()} (${describeState(ctx.lastState())}).`,
          );
        return;
      }
      case 'model':
        reporter.log(modelLine(e));
        break;
      case 'applied':
        break;
      case 'paramHash':
        reporter.log(`epoch ${e.epoch} parameter hash ${e.hash.slice(0, 16)}…`);
        // Keep these parameters in IndexedDB: the next epoch starts from them, so a reload needs no download.
        ctx.cacheParameters(e.step, e.epoch, e.hash).catch((err: unknown) =>
          ctx.post({
            type: 'error',
            where: 'cache',
            message: `could not cache the checkpoint: ${String(err)}`,
          }),
        );
        break;
      case 'resync':
        reporter.log(`re-syncing: ${e.reason}`);
        break;
      case 'warning':
        reporter.log(`warning: ${e.message}`);
        break;
      case 'error':
        ctx.post({ type: 'error', where: 'client', message: e.message.split('\n')[0] ?? e.message });
        break;
      default:
        return;
    }
    reporter.publish();
  };
}
