// Witnessing (docs/protocol.md "Witnesses and quorum", "Client state machine"): a witness of round h submits
// an attestation of the round h−1 results it verified (one bit per result slot), with its own loss, throughput and bandwidth; at the start of
// round h it also reports round h−2 trainers that round h−1's witnesses did not see (health checks).
import {
  attestationOf,
  bytesToHex,
  currentRound,
  isWitness,
  rosterIndexOf,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  sha256Concat,
  unhealthyTrainers,
  type CoordinatorState,
  type HealthReport,
  type Round,
  type WitnessMetadata,
} from '@meshtrain/core';
import type { ClientContext, EpochProgress } from './context.ts';
import { messageOf } from './errors.ts';
import type { HeldResult } from './results-store.ts';

export class WitnessPhase {
  private readonly ctx: ClientContext;
  private readonly lastLoss: () => number | null;

  /** `lastLoss`: the loss of this client's last train step, reported with the attestation. */
  constructor(ctx: ClientContext, lastLoss: () => number | null) {
    this.ctx = ctx;
    this.lastLoss = lastLoss;
  }

  /**
   * Witness duty for the current round h: an attestation of round h−1's verified results. Submitted as soon as
   * they are complete and this round's trainers have published (so an early quorum never cuts training
   * short), or when RoundWitness starts, whatever arrived by then.
   */
  async maybeWitness(s: CoordinatorState, epoch: EpochProgress): Promise<void> {
    const round = currentRound(s);
    if (!round || epoch.witnessedSteps.has(round.step)) return;
    const index = rosterIndexOf(s, round, this.ctx.id);
    if (!isWitness(s, index, round)) return;
    const prev = roundAtHeight(s, round.height - 1);
    const prevSet = prev ? this.verifiedFor(s, prev) : { items: [], slots: [], complete: true };
    const curSet = this.verifiedFor(s, round);
    // A light replica sees no admissions of the open round, only that every trainer published (`filled`).
    const published = curSet.complete || (round.admitted === undefined && round.filled === true);
    const ready = prevSet.complete && published && epoch.trainedHeight >= round.height;
    if (s.run_state === 'RoundTrain' && !ready) return;
    epoch.witnessedSteps.add(round.step);
    // A slot the host admitted is attested only with that commitment (the vote is for the admitted result);
    // where the host admitted none, holding a verified result says its trainer delivered (health checks).
    const admitted = prev ? roundAdmitted(prev) : [];
    const attested = attestationOf(prevSet.slots.length, (slot) => {
      const held = prevSet.slots[slot];
      if (!held) return false;
      const want = admitted[slot] ?? null;
      return want === null || bytesToHex(held.commitment) === want;
    });
    const metadata = this.metadata();
    await this.ctx.o.link.submitWitness({
      step: round.step,
      proof: roundSelection(round).witnessProof(index),
      attested,
      // Informational (docs/protocol.md "Witnesses and quorum"): a hash over the commitments in batch order.
      broadcastMerkle: sha256Concat(...prevSet.items.map((h) => h.commitment)),
      ...(metadata ? { metadata } : {}),
    });
    this.ctx.emit({ type: 'witness', step: round.step, results: prevSet.items.length });
  }

  /**
   * Witnesses of round h report round h−2 trainers whose results did not get through: core's
   * unhealthyTrainers, the same test the coordinator applies to every accusation.
   */
  async healthCheck(s: CoordinatorState, round: Round, epoch: EpochProgress): Promise<void> {
    if (round.height < 2 || epoch.healthCheckedHeight >= round.height) return;
    epoch.healthCheckedHeight = round.height;
    if (!isWitness(s, rosterIndexOf(s, round, this.ctx.id), round)) return;
    const judged = roundAtHeight(s, round.height - 2);
    if (!judged) return;
    const reports: HealthReport[] = unhealthyTrainers(s).map((a) => ({
      clientIndex: a.client_index,
      committeeProof: roundSelection(judged).committeeProof(a.index),
    }));
    if (reports.length === 0) return;
    await this.ctx.o.link.submitHealthCheck({ step: round.step, reports }).catch((e: unknown) => {
      this.ctx.emit({ type: 'warning', message: `health check refused: ${messageOf(e)}` });
    });
    this.ctx.emit({ type: 'healthCheck', step: round.step, reported: reports.length });
  }

  /**
   * Verified results this client holds for a round, first per batch: in slot order (`slots`, null where it
   * holds none) and as a list of the ones it holds (`items`).
   */
  private verifiedFor(
    s: CoordinatorState,
    round: Round,
  ): { items: HeldResult[]; slots: (HeldResult | null)[]; complete: boolean } {
    const items: HeldResult[] = [];
    const slots: (HeldResult | null)[] = [];
    let complete = true;
    for (const a of roundAssignments(s, round)) {
      const got = this.ctx.results.heldFor(round.step, a.batch, a.id);
      slots.push(got ?? null);
      if (got) items.push(got);
      else if (s.epoch.clients[a.client_index]?.state === 'Healthy') complete = false;
    }
    return { items, slots, complete };
  }

  /** Loss, tokens/s and bandwidth as measured; none before this client trained a batch. */
  private metadata(): WitnessMetadata | null {
    const loss = this.lastLoss();
    if (loss === null) return null;
    const { stats, meter } = this.ctx;
    return {
      loss,
      tokensPerSec: meter.tokensPerSec,
      bandwidth: meter.bandwidth(this.ctx.now(), stats.bytesSent + stats.bytesReceived),
    };
  }
}
