// Cooldown (docs/protocol.md "Client state machine"): the epoch's last applicable results are applied, the
// parameters hashed and the hash reported (the relay compares it with the majority: a minority replica
// re-syncs), then the parameters are shared with peers and, by one client per epoch, uploaded as the relay's
// checkpoint.
import { bytesToHex, currentRound, refusalCode, type CoordinatorState } from '@meshtrain/core';
import { parameterHash } from '@meshtrain/model';
import type { Checkpoint } from '../interfaces.ts';
import { applyThrough } from './apply.ts';
import type { ClientContext, EpochProgress } from './context.ts';
import { UPLOAD_ATTEMPTS, UPLOAD_BACKOFF_MS } from './defaults.ts';
import { messageOf, PARAM_HASH_MISMATCH, ResyncNeeded } from './errors.ts';

export class CooldownPhase {
  private readonly ctx: ClientContext;

  constructor(ctx: ClientContext) {
    this.ctx = ctx;
  }

  async run(s: CoordinatorState, epoch: EpochProgress): Promise<void> {
    const { ctx } = this;
    ctx.setPhase('Cooldown', s);
    if (epoch.hashReported) return;
    const last = currentRound(s);
    // Results of the last two rounds are never applied (drain rounds, or the data rewinds for them).
    if (last) await applyThrough(ctx, epoch, s, last.height - 2, last);
    epoch.hashReported = true;
    const params = await ctx.replica.read();
    const hash = parameterHash(params);
    const hex = bytesToHex(hash);
    ctx.replica.markEpochStart(s.progress.step, hex);
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
    // One uploader per epoch: the first Healthy client of the epoch.
    const first = s.epoch.clients.find((c) => c.state === 'Healthy');
    if (first?.id === ctx.id && ctx.o.checkpoints.upload) void this.upload(ck);
  }

  /** In the background: the relay keeps an upload only once the epoch's majority hash exists. */
  private async upload(ck: Checkpoint): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.ctx.o.checkpoints.upload?.(ck);
        return;
      } catch (e) {
        if (attempt >= UPLOAD_ATTEMPTS) {
          this.ctx.emit({ type: 'warning', message: `checkpoint upload failed: ${messageOf(e)}` });
          return;
        }
        await this.ctx.sleep(UPLOAD_BACKOFF_MS * attempt);
      }
    }
  }
}
