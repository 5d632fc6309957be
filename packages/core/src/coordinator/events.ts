import type { CommitteeProof, WitnessProof } from '../selection/committee.ts';
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import type { CoordinatorError } from './errors.ts';
import type { ClientState, CoordinatorState, RunState } from '../state/coordinator-state.ts';

/** What the shell feeds `tick`. Events are not stored, so they may carry bytes. */
export type CoordinatorEvent =
  /** Timer (the relay sends one every ~500 ms); `entropy` (hex) is mixed into later round seeds. */
  | { type: 'tick'; entropy?: string }
  | { type: 'entropy'; entropy: string }
  /** `origin`: the host's tag of where the join came from (16 hex digits; state/coordinator-state.ts Member.origin). */
  | { type: 'join'; id: string; p2p_id: string; origin?: string; verifier_only?: true }
  /** Voluntary leave or disconnect: Healthy → Withdrawn. */
  | { type: 'leave'; id: string }
  /** The shell proved the client lied (bad signature, commitment mismatch…): Ejected and banned. */
  | { type: 'eject'; id: string; reason: string }
  | { type: 'warmup_witness'; id: string }
  | {
      type: 'witness';
      id: string;
      /** The step of the round being witnessed; a late witness for an earlier round is refused without penalty. */
      step: number;
      proof: WitnessProof;
      /**
       * One bit per result slot of the witnessed round's previous round, in `roundAssignments` order: the
       * results this witness holds (witness/attestation.ts, docs/protocol.md "Witnesses and quorum").
       */
      attested: Uint8Array;
      broadcast_merkle?: string;
    }
  /**
   * The host stored `id`'s result for `batch` of the round whose step is `step`, after core's admission
   * checks (protocol/result-admission.ts). Only the host feeds this: it is its record of what it delivers.
   */
  | {
      type: 'result_admitted';
      id: string;
      step: number;
      batch: { start: number; end: number };
      commitment: string;
    }
  /** A verifier of the open round reports on a sampled result of the round before (coordinator/verification.ts). */
  | {
      type: 'verdict';
      id: string;
      step: number;
      batch: { start: number; end: number };
      pass: boolean;
      /** A failure whose measurements prove the cheat on their own (protocol/verification.ts conclusiveFailure). */
      conclusive?: boolean;
      /**
       * With `conclusive`: the verifier's fingerprint agreement (0..10 000) and update agreement
       * (−10 000..10 000), ×10 000 and rounded: the evidence a third party checks by recomputing.
       */
      evidence?: [number, number];
    }
  /** `id` reports clients whose results the previous round's witnesses did not see. */
  | { type: 'health_check'; id: string; checks: ReadonlyArray<{ id: string; proof: CommitteeProof }> }
  | { type: 'pause' }
  | { type: 'resume' }
  | { type: 'update_config'; config: CoordinatorConfig };

export type CoordinatorEffect =
  | { type: 'RunStateChanged'; from: RunState; to: RunState }
  | { type: 'EpochStarted'; epoch: number; clients: number }
  | { type: 'EpochEnded'; epoch: number; success: boolean }
  | {
      type: 'RoundStarted';
      epoch: number;
      step: number;
      height: number;
      random_seed: string;
      data_index: number;
      batch_size: number;
      training: boolean;
      clients: number;
      /** Retry intervals of earlier rounds the round took (coordinator/retries.ts). */
      retries: number;
    }
  | {
      type: 'RoundEnded';
      step: number;
      height: number;
      witnesses: number;
      quorum: number;
      quorum_reached: boolean;
    }
  | { type: 'WitnessAccepted'; step: number; index: number; id: string }
  | { type: 'ResultAdmitted'; step: number; id: string; commitment: string }
  | { type: 'VerdictRecorded'; step: number; trainer: string; verifier: string; pass: boolean }
  /** A verifier's conclusive accusation was refuted by a trusted verifier's pass: it takes a strike. */
  | { type: 'AccusationRefuted'; step: number; trainer: string; verifier: string }
  /** Verification confirmed that `id` cheated on its result of `step` (coordinator/verification.ts): ejected. */
  | { type: 'CheatConfirmed'; id: string; step: number }
  | { type: 'ClientJoined'; id: string }
  | { type: 'ClientLeft'; id: string; state: ClientState }
  | { type: 'ClientDropped'; id: string; reason: string }
  | { type: 'ClientEjected'; id: string; reason: string }
  | { type: 'ConfigUpdated' };

export interface TickResult {
  state: CoordinatorState;
  effects: CoordinatorEffect[];
  error?: CoordinatorError;
}
