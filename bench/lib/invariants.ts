// Invariants of every coordinator transition, reported as strings (the benchmark counts them; tests use
// their own assertions). Cheap enough to run after every tick at 10,000 clients.
import {
  currentRound,
  roundAtHeight,
  type CoordinatorEvent,
  type CoordinatorState,
  type RunState,
  type TickResult,
} from '../../packages/core/src/index.ts';

export const ALLOWED_TRANSITIONS: Record<RunState, readonly RunState[]> = {
  Uninitialized: ['Paused'],
  WaitingForMembers: ['Warmup', 'Paused'],
  Warmup: ['RoundTrain', 'WaitingForMembers', 'Paused', 'Finished'],
  RoundTrain: ['RoundWitness'],
  RoundWitness: ['RoundTrain', 'Cooldown'],
  Cooldown: ['WaitingForMembers', 'Paused', 'Finished'],
  Paused: ['WaitingForMembers', 'Finished'],
  Finished: [],
};

const PENALISED = new Set(['BadProof', 'NotAWitness', 'BadAttestation']);

export class InvariantChecker {
  violations: string[] = [];
  /** Next sample index the network as a whole should apply (results of round h land at round h+2). */
  nextApplied = 0;

  private fail(message: string): void {
    if (this.violations.length < 50) this.violations.push(message);
    else this.violations.length++;
  }

  check(before: CoordinatorState, event: CoordinatorEvent, r: TickResult): void {
    const after = r.state;
    if (r.error && !PENALISED.has(r.error.code) && after !== before)
      this.fail(`${event.type} refused (${r.error.code}) but state changed`);
    let phase = before.run_state;
    for (const e of r.effects) {
      if (e.type === 'RunStateChanged') {
        if (e.from !== phase || !ALLOWED_TRANSITIONS[phase].includes(e.to))
          this.fail(`illegal transition ${e.from} -> ${e.to} (was ${phase})`);
        phase = e.to;
      } else if (e.type === 'RoundStarted') {
        if (e.clients < after.config.min_clients)
          this.fail(`round ${e.step} started with ${e.clients} < min_clients`);
        const round = currentRound(after);
        const prev = roundAtHeight(after, e.height - 1);
        if (!round || round.height !== e.height) this.fail(`round ${e.step} missing from the ring`);
        else {
          if (prev && round.data_index !== prev.data_index + prev.batch_size)
            this.fail(`round ${e.step} does not continue the data`);
          if (e.height === 0 && round.data_index !== after.progress.epoch_start_data_index)
            this.fail(`epoch ${e.epoch} does not resume the data`);
          if (!round.training && round.batch_size !== 0) this.fail(`drain round ${e.step} consumes data`);
        }
        const applied = roundAtHeight(after, e.height - 2);
        if (applied) {
          if (applied.data_index !== this.nextApplied)
            this.fail(
              `round ${applied.step} applies from ${applied.data_index}, expected ${this.nextApplied}`,
            );
          this.nextApplied = applied.data_index + applied.batch_size;
        }
      } else if (e.type === 'RoundEnded' && !e.quorum_reached && phase === 'RoundTrain') {
        this.fail(`round ${e.step} missed quorum but training continued`);
      }
    }
    if (after.run_state !== phase) this.fail(`state ${after.run_state} but effects say ${phase}`);
    const round = currentRound(after);
    if (round && round.witnesses.length > round.witness_count)
      this.fail(`round ${round.step} has more witnesses than selected`);
  }
}
