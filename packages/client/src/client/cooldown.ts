// Cooldown (docs/protocol.md "Client state machine"): the epoch's last applicable results are applied, the
// parameters hashed and the hash reported (the relay compares it with the majority: a minority replica
// re-syncs), then the parameters are shared with peers and uploaded as the relay's checkpoint by the epoch's
// first voter, or by the next ones in turn if it is still missing after their standby.
import {
  bytesToHex,
  checkpointUploaderRank,
  currentRound,
  epochEndOf,
  refusalCode,
  type CoordinatorState,
} from '@meshtrain/core';
import { parameterHash } from '@meshtrain/model';
import type { Checkpoint } from '../interfaces.ts';
import { applyThrough, appliesAtOnce, settleThrough } from './apply.ts';
import type { ClientContext, EpochProgress } from './context.ts';
import { POLL_INTERVAL_MS, UPLOAD_ATTEMPTS, UPLOAD_BACKOFF_MS, UPLOAD_STANDBY_MS } from './defaults.ts';
import { messageOf, PARAM_HASH_MISMATCH, ResyncNeeded } from './errors.ts';

export class CooldownPhase {
  private readonly ctx: ClientContext;
  /** Checkpoint uploads still running in the background (a standby's wait included). */
  private readonly uploads = new Set<Promise<void>>();
  /** Set once the client's run ended, and how. */
  private ended: 'finished' | 'stopped' | null = null;

  constructor(ctx: ClientContext) {
    this.ctx = ctx;
  }

  /**
   * The run ended: a standby stops waiting. When the run finished it checks at once and uploads only if the
   * relay still has no checkpoint (the Finished state follows the epoch's cooldown, which is the designated
   * uploader's time; no joiner comes after it, but the run's final parameters must be kept); when the client
   * was stopped it gives up, and so do retries. A stop wins over a finish.
   */
  end(how: 'finished' | 'stopped'): void {
    if (this.ended !== 'stopped') this.ended = how;
  }

  /** Resolves once every background upload ended (each is bounded by UPLOAD_ATTEMPTS). */
  async settled(): Promise<void> {
    await Promise.all([...this.uploads]);
  }

  async run(s: CoordinatorState, epoch: EpochProgress): Promise<void> {
    const { ctx } = this;
    ctx.setPhase('Cooldown', s);
    if (epoch.hashReported) return;
    const last = currentRound(s);
    // Results of the last two rounds are never applied (drain rounds, or the data rewinds for them).
    if (last && appliesAtOnce(ctx))
      await settleThrough(ctx, epoch, s, last.height - 2, last.height - 2, last);
    else if (last) await applyThrough(ctx, epoch, s, last.height - 2, last);
    epoch.hashReported = true;
    const params = await ctx.replica.read();
    const hash = parameterHash(params);
    const hex = bytesToHex(hash);
    ctx.replica.markEpochStart(s.progress.step, hex, params);
    ctx.emit({ type: 'paramHash', epoch: s.progress.epoch, step: s.progress.step, hash: hex });
    try {
      await ctx.o.link.reportParamHash(s.progress.epoch, s.progress.step, hash);
    } catch (e) {
      // The relay compares hashes; being in the minority means this replica diverged.
      if (refusalCode(e) === PARAM_HASH_MISMATCH) throw new ResyncNeeded(messageOf(e));
      ctx.emit({ type: 'warning', message: `parameter hash report failed: ${messageOf(e)}` });
    }
    const ck: Checkpoint = { step: s.progress.step, epoch: s.progress.epoch, paramHash: hash, params };
    await ctx.o.peers?.shareCheckpoint?.(ck).catch(() => {});
    // One uploader per epoch, the first voter; the others stand by in rank order, each uploading only if the
    // checkpoint is still missing after its wait (a designated uploader that vanishes must not leave joiners
    // without parameters).
    const end = epochEndOf(s);
    const rank = end ? checkpointUploaderRank(end, ctx.id) : -1;
    if (rank >= 0 && ctx.o.checkpoints.upload) {
      const upload = this.upload(ck, rank).finally(() => this.uploads.delete(upload));
      this.uploads.add(upload);
    }
  }

  /** In the background: the relay keeps an upload only once the epoch's agreed hash exists. */
  private async upload(ck: Checkpoint, rank: number): Promise<void> {
    if (rank > 0) {
      // In slices, so that the run's end cuts the wait short and leaves no timer behind.
      for (let waited = 0; waited < rank * UPLOAD_STANDBY_MS && !this.ended; waited += POLL_INTERVAL_MS)
        await this.ctx.sleep(POLL_INTERVAL_MS);
      if (this.ended === 'stopped') return;
      const has = await this.ctx.o.checkpoints.has?.(ck.step).catch(() => false);
      if (has !== false) return;
      this.ctx.emit({
        type: 'warning',
        message: `no checkpoint for step ${ck.step} yet: uploading it (standby ${rank})`,
      });
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await this.ctx.o.checkpoints.upload?.(ck);
        return;
      } catch (e) {
        if (attempt >= UPLOAD_ATTEMPTS || this.ended === 'stopped') {
          this.ctx.emit({ type: 'warning', message: `checkpoint upload failed: ${messageOf(e)}` });
          return;
        }
        await this.ctx.sleep(UPLOAD_BACKOFF_MS * attempt);
      }
    }
  }
}
