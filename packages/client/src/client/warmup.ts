// Warmup (docs/protocol.md "Client state machine"): the epoch's members get the parameters the epoch starts
// from — kept from the last epoch's end, the run seed's init for the very first epoch, or a checkpoint
// verified by its hash — then send the warmup witness that tells the coordinator this client is ready.
import { bytesToHex, refusalCode, type CoordinatorState } from '@meshtrain/core';
import { parameterHash } from '@meshtrain/model';
import type { Checkpoint, ParameterMap } from '../interfaces.ts';
import type { ClientContext, EpochProgress } from './context.ts';
import { CHECKPOINT_LOAD_RETRIES, CHECKPOINT_RETRY_DELAY_MS } from './defaults.ts';
import { messageOf } from './errors.ts';

export class WarmupPhase {
  private readonly ctx: ClientContext;

  constructor(ctx: ClientContext) {
    this.ctx = ctx;
  }

  async run(s: CoordinatorState, epoch: EpochProgress): Promise<void> {
    await this.ensureModel(s);
    this.ctx.setPhase('Warmup', s);
    if (epoch.warmupSent) return;
    // Loading the model may outlast the phase: a witness for a Warmup that has ended would only be refused.
    const latest = this.ctx.latest() ?? s;
    if (latest.run_state !== 'Warmup' || latest.progress.epoch !== s.progress.epoch) return;
    epoch.warmupSent = true;
    // The phase can still end while the witness is in flight; refused as WrongPhase, it was not needed.
    await this.ctx.o.link.submitWarmupWitness(s.progress.epoch).catch((e: unknown) => {
      if (refusalCode(e) !== 'WrongPhase') throw e;
    });
  }

  /** The parameters of `progress.step`: kept if this replica holds them, else initialised or loaded. */
  private async ensureModel(s: CoordinatorState): Promise<void> {
    const { replica } = this.ctx;
    const step = s.progress.step;
    if (replica.paramsStep === step && !replica.diverged) {
      this.ctx.emit({ type: 'model', source: 'kept', step, hash: replica.paramsHash });
      return;
    }
    this.ctx.setPhase('Initializing', s);
    let params: ParameterMap;
    let via: string | undefined;
    const source = step === 1 && s.progress.epoch === 0 ? 'init' : 'checkpoint';
    if (source === 'init') params = this.ctx.o.initParams();
    else {
      const ck = await this.loadCheckpoint(step);
      params = ck.params;
      via = ck.via;
    }
    const hash = bytesToHex(parameterHash(params));
    replica.install(params, step, hash);
    this.ctx.emit({ type: 'model', source, step, hash, ...(via ? { via } : {}) });
  }

  /** A checkpoint for `step` whose parameters hash to what it claims, retried while none is there yet. */
  private async loadCheckpoint(step: number): Promise<Checkpoint> {
    const { ctx } = this;
    for (let attempt = 0; ; attempt++) {
      const ck = await ctx.o.checkpoints.load(step).catch((e: unknown) => {
        ctx.emit({ type: 'warning', message: `checkpoint: ${messageOf(e)}` });
        return null;
      });
      if (ck && (ck.step === step || ck.rolledBackFrom === step)) {
        const actual = bytesToHex(parameterHash(ck.params));
        if (actual === bytesToHex(ck.paramHash)) {
          if (ck.step !== step)
            ctx.emit({
              type: 'warning',
              message: `the parameters of step ${step} were lost with the last clients of their epoch; continuing from the checkpoint of step ${ck.step}`,
            });
          return ck;
        }
        ctx.emit({
          type: 'warning',
          message: `checkpoint for step ${step} hashes to ${actual}, not ${bytesToHex(ck.paramHash)}: refused`,
        });
      }
      if (attempt >= CHECKPOINT_LOAD_RETRIES)
        throw new Error(`no verified checkpoint for step ${step} after ${attempt + 1} tries`);
      await ctx.sleep(CHECKPOINT_RETRY_DELAY_MS);
    }
  }
}
