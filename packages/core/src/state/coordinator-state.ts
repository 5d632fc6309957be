// The coordinator's state: plain JSON data only (no BigInt, Map or class instances) so a shell can persist
// it with JSON.stringify after every transition and resume from it byte-for-byte. u64 seeds are 16 hex
// digits; witness attestations are base64.
import type { BatchId } from '../selection/data-assignment.ts';
import type { CoordinatorConfig } from './coordinator-config.ts';

export type RunState =
  | 'Uninitialized'
  | 'WaitingForMembers'
  | 'Warmup'
  | 'RoundTrain'
  | 'RoundWitness'
  | 'Cooldown'
  | 'Finished'
  | 'Paused';

export type ClientState = 'Healthy' | 'Dropped' | 'Withdrawn' | 'Ejected';

/** A client registered for the run: it enters the next epoch that has room. */
export interface Member {
  /** Ed25519 public key, 64 lowercase hex digits. */
  id: string;
  /** The libp2p peer id the client is reachable at. */
  p2p_id: string;
  /**
   * Where the host saw the join come from, as 16 hex digits (the relay's salted hash of the IPv4 /24 or IPv6
   * /64, never the address): no identity verifies one of the same origin (coordinator/verification.ts).
   * Absent when the host gave none.
   */
  origin?: string;
  /**
   * Joined to verify only (`node-trainer verify`): never in a round's roster, so it trains and witnesses
   * nothing and counts in no quorum or min_clients; verificationTasks draws it as a verifier (round.verifiers).
   */
  verifier_only?: true;
}

/** A client of the current epoch. Its index in `epoch.clients` never changes during the epoch. */
export interface EpochClient extends Member {
  state: ClientState;
  /** Round height at which it stopped being Healthy; -1 while Healthy. */
  exited_height: number;
}

export interface WitnessRecord {
  /** Roster index of the witness in its round. */
  index: number;
  /**
   * Base64 of the witness's attestation over the previous round's result slots (witness/attestation.ts);
   * dropped (null) once no reader needs it: only the current and previous round keep attestations.
   */
  attested: string | null;
  /** Hash over the received commitments, informational (docs/protocol.md "Witnesses and quorum"). */
  broadcast_merkle: string | null;
}

export interface Round {
  height: number;
  /** `progress.step` when the round started: results and witnesses name their round by it. */
  step: number;
  /** First sample index of the round; the round trains [data_index, data_index + batch_size). */
  data_index: number;
  /**
   * Fresh samples of the round; 0 in drain rounds, which train nothing and consume no data, and in rounds
   * whose trainers all took retries.
   */
  batch_size: number;
  /**
   * Intervals of earlier rounds that no witness quorum attested (coordinator/retries.ts), each assigned whole
   * to one trainer ahead of the fresh data. Absent in snapshots written before retries existed: read it with
   * `roundRetries`, which treats a missing field as [].
   */
  retries?: BatchId[];
  training: boolean;
  /** u64 as 16 hex digits; committee, witnesses and batch assignment all derive from it. */
  random_seed: string;
  /** `epoch.clients` indices of the clients taking part, ascending; selection index i means roster[i]. */
  roster: number[];
  /**
   * W: witnesses selected for the round. The quorum is that of W less `departed` (`liveWitnessCount` in
   * coordinator/queries.ts).
   */
  witness_count: number;
  verification_percent: number;
  witnesses: WitnessRecord[];
  /**
   * Roster indices (ascending) of selected witnesses that left the epoch (withdrew, were dropped or ejected)
   * while the round was open and before they submitted. They never can, so the round neither waits for them nor
   * counts them in its quorum. Absent when none did; fixed once the round has ended.
   */
  departed?: number[];
  /**
   * Commitments (hex) the host (the relay, or an in-process hub) admitted, one slot per entry of
   * `roundAssignments(state, round)` in that order; null where none arrived. Set by `result_admitted` while
   * the round is open; a second, different commitment for a slot is equivocation (coordinator/results.ts).
   * Absent in rounds stored before admission existed: read it with `roundAdmitted`.
   */
  admitted?: (string | null)[];
  /**
   * Set once the host has admitted a result for every assignment of the round: every trainer published. The
   * signal a witness that does not see the admitted record (a light replica) waits for before it reports.
   */
  filled?: true;
  /**
   * Health-check accusations made in this round: for each accused `epoch.clients` index, the roster indices
   * of the witnesses that accused it. A quorum of accusers drops the client (coordinator/witnessing.ts).
   */
  accusations?: { client_index: number; by: number[] }[];
  /**
   * Verdicts on this round's sampled results, reported by the next round's verifiers: the result's slot in
   * `roundAssignments`, the verifier's `epoch.clients` index, pass or fail, and whether a failure was
   * conclusive (coordinator/verification.ts).
   */
  verdicts?: {
    slot: number;
    by: number;
    pass: boolean;
    conclusive?: true;
    /**
     * A conclusive failure's evidence: the verifier's fingerprint agreement and update agreement for the named
     * batch, ×10 000 and rounded, which anyone recomputing the result can check (docs/protocol.md).
     */
    evidence?: [number, number];
  }[];
  /**
   * In an anchored run (config.trusted_verifiers), the `epoch.clients` indices that were qualified verifiers
   * when the round opened (trusted, or with a verified history: coordinator/trust.ts), and those whose
   * sampling is raised after a failed judgement. Absent in a run without anchor.
   */
  qualified?: number[];
  struck?: number[];
  /** `epoch.clients` indices of the verify-only clients Healthy when the round opened; absent when none. */
  verifiers?: number[];
  /**
   * Set when this round ends (coordinator/round-outcome.ts): its slots with an admitted result (base64, the
   * attestation bit layout). Absent while the round is open.
   */
  admitted_bits?: string;
  /**
   * In a light replica's state and a summary only, right after admitted_bits: hex SHA-256 of the round's
   * canonical AdmittedList frame, the one name of that list — the address under which peers and the relay
   * serve it, and what a replica checks a fetched list against. The coordinator does not set it: a full
   * state holds the commitments the address is derived from (replica/admitted-lists.ts `roundListAddress`).
   */
  admitted_list?: string;
  /** Set when the round after this one ends: the slots every peer applies (base64 bitmap). */
  accepted_bits?: string;
  /** Set with accepted_bits: the slots whose trainer got through (admitted, or seen by a witness quorum). */
  alive_bits?: string;
  /**
   * Set with accepted_bits in an anchored run: the slots a qualified verifier passed (none failed), and the
   * slots one failed; they extend the trainers' records (`state.trust`).
   */
  vetted_bits?: string;
  struck_bits?: string;
}

export interface EpochState {
  clients: EpochClient[];
  /** Ring of the last 4 rounds: the round of height h sits at h % 4. */
  rounds: Round[];
  rounds_head: number;
  start_step: number;
  /** 0 = not draining; else the epoch ends when `progress.step` reaches it. */
  last_step: number;
  start_timestamp: number;
  cold_start_epoch: boolean;
  /** `clients` indices that sent warmup_witness. */
  warmup_witnesses: number[];
  /**
   * Trainers whose cheating two verifiers confirmed, with the round height it was confirmed at: none of
   * their results in this epoch is applied (queries.acceptedCommitments, queries.replayExclusions).
   */
  cheats?: { client_index: number; height: number }[];
}

export interface CoordinatorState {
  version: 1;
  run_id: string;
  /** 32-byte hex seed fixed at run creation; round seeds derive from it (see seed.ts). */
  run_seed: string;
  config: CoordinatorConfig;
  run_state: RunState;
  run_state_start: number;
  pending_pause: boolean;
  progress: {
    epoch: number;
    /** Round counter, 1-based as in Psyche; drain rounds count too. */
    step: number;
    /** Where the next epoch's first round starts reading samples. */
    epoch_start_data_index: number;
    /**
     * Retry queue, oldest first: intervals whose results no witness quorum attested, waiting for a trainer.
     * Kept in `progress` (not `epoch`, which every epoch start zeroes) so it survives epoch ends and
     * pause/resume. Absent in older snapshots: read it with `retryQueue`, which treats a missing field as [].
     */
    retry_batches?: BatchId[];
  };
  /** Latest shell-supplied entropy (hex, may be empty), mixed into every round seed. */
  entropy: string;
  members: Member[];
  epoch: EpochState;
  /** Ids proven dishonest; never admitted again. */
  ejected: string[];
  /** Invalid witness submissions per client id; MAX_STRIKES of them eject the client. */
  strikes: Record<string, number>;
  /**
   * Per trainer id, its last STRIKE_WINDOW verified results, oldest first: 1 when every verifier failed it,
   * else 0; the least recently verified trainers are forgotten past max_clients ids
   * (coordinator/verification.ts). Absent in older snapshots.
   */
  verified?: Record<string, number[]>;
  /**
   * Per identity, its last TRUST_WINDOW results judged by a qualified verifier, oldest first: 1 passed, 0
   * failed (coordinator/trust.ts); bounded to max_clients ids like `verified`. A decision record kept by light
   * replicas too (it changes only with round outcomes). Absent until an anchored run judges a result.
   */
  trust?: Record<string, number[]>;
}
