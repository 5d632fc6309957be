// What the phases of one client share: its options and identity, the replica, the results it knows of, the
// fetcher, its counters, the clock, and the bookkeeping of the epoch it is in.
import {
  coldStartFactor,
  innerScheduleStep,
  learningRate,
  type CoordinatorState,
  type DistroResult,
  type LrSchedule,
} from '@meshtrain/core';
import type { ClientOptimizer } from './optimizer.ts';
import type { Replica } from './replica.ts';
import type { ResultFetcher } from './result-fetcher.ts';
import type { ResultsStore } from './results-store.ts';
import type { ThroughputMeter } from './throughput.ts';
import type { ClientEvent, ClientOptions, ClientPhase, ClientStats } from './types.ts';

export interface ClientContext {
  readonly o: ClientOptions;
  /** This client's coordinator id (hex public key). */
  readonly id: string;
  /** DisTrO or SparseLoCo, with the latter's private state. */
  readonly optimizer: ClientOptimizer;
  readonly schedule: LrSchedule;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly stats: ClientStats;
  readonly replica: Replica;
  readonly results: ResultsStore;
  readonly fetcher: ResultFetcher;
  readonly meter: ThroughputMeter;
  emit(e: ClientEvent): void;
  setPhase(phase: ClientPhase, s: CoordinatorState | null): void;
  /** The newest state the link handed on: a phase that waited (loading a model) checks it is still due. */
  latest(): CoordinatorState | null;
}

/**
 * One applied round: the lr it was applied with and each accepted result (as received, either optimizer's)
 * with its trainer's epoch index and commitment (hex).
 */
export interface AppliedRound {
  height: number;
  lr: number;
  results: { clientIndex: number; commitment: string; tensors: DistroResult[] }[];
}

/** Per-epoch progress: a fresh one per epoch (number and start step), so nothing of the last one lingers. */
export class EpochProgress {
  readonly key: string;
  /** Highest round height whose accepted results are applied (SparseLoCo: at least speculatively). */
  appliedThrough = -1;
  /** SparseLoCo: highest round height whose applied results are checked against its final accepted set. */
  settledThrough = -1;
  /** Highest round height this client handled (applied, health-checked, trained). */
  trainedHeight = -1;
  healthCheckedHeight = -1;
  /** Highest round height whose verification tasks (on the round before it) this client ran. */
  verifiedHeight = -1;
  /**
   * What this client applied in the epoch, kept while the run verifies (always in a SparseLoCo run): if a
   * cheat is confirmed after some of its results were applied, or a round's final accepted set is smaller
   * than what was applied at once, the replica rebuilds from the epoch's start without them (apply.ts).
   */
  readonly applied: AppliedRound[] = [];
  readonly witnessedSteps = new Set<number>();
  warmupSent = false;
  /** The epoch end's parameter hash was reported (its parameters now belong to the next epoch). */
  hashReported = false;

  constructor(key: string) {
    this.key = key;
  }

  static keyOf(s: CoordinatorState): string {
    return `${s.progress.epoch}:${s.epoch.start_step}`;
  }
}

/** The learning rate of `step` in the state's epoch: the schedule, ramped in a cold-start epoch. */
export function learningRateAt(schedule: LrSchedule, step: number, s: CoordinatorState): number {
  const window: [number, number] | undefined = s.epoch.cold_start_epoch
    ? [s.epoch.start_step, s.epoch.start_step + s.config.cold_start_warmup_steps]
    : undefined;
  return learningRate(schedule, Math.max(0, step)) * coldStartFactor(step, window);
}

/**
 * The learning rate of SparseLoCo's inner step `h` of round step `step`: the schedule counts inner steps
 * (core's innerScheduleStep), the cold-start ramp counts rounds.
 */
export function innerLearningRateAt(
  schedule: LrSchedule,
  step: number,
  h: number,
  innerSteps: number,
  s: CoordinatorState,
): number {
  const window: [number, number] | undefined = s.epoch.cold_start_epoch
    ? [s.epoch.start_step, s.epoch.start_step + s.config.cold_start_warmup_steps]
    : undefined;
  return (
    learningRate(schedule, Math.max(0, innerScheduleStep(step, h, innerSteps))) *
    coldStartFactor(step, window)
  );
}

/** This client's index in `epoch.clients`, or -1. */
export function clientIndexOf(s: CoordinatorState, id: string): number {
  return s.epoch.clients.findIndex((c) => c.id === id);
}

/** A Healthy member of the state's epoch. */
export function isHealthyMember(s: CoordinatorState, id: string): boolean {
  return s.epoch.clients[clientIndexOf(s, id)]?.state === 'Healthy';
}
