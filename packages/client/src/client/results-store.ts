// The results a client knows of, per round step and batch: the commitments announced for each batch (signature-
// checked, maybe not fetched yet) and the verified results it holds. Accepting a result needs the candidates
// (core's acceptedCommitments picks among them); applying and witnessing need the held payloads.
import { bytesToHex, type BatchId, type TrainingResult } from '@meshtrain/core';

/** A verified result this client holds (its own or a peer's). */
export interface HeldResult {
  commitment: Uint8Array;
  /** The trainer's coordinator id (hex). */
  from: string;
  /** The frame as received (SignedResult or TrainingResult), for its size. */
  frame: Uint8Array;
  result: TrainingResult;
}

/** An announced commitment for a batch and who announced it. */
export interface Candidate {
  commitment: Uint8Array;
  from: string;
}

/** Candidates of one step: batch start → batch end → candidates, in arrival order. */
type StepCandidates = Map<number, Map<number, Candidate[]>>;

export class ResultsStore {
  /** Held results by commitment (hex). */
  private readonly held = new Map<string, HeldResult>();
  private readonly candidates = new Map<number, StepCandidates>();

  /** Keeps a verified result; it also becomes a candidate of its batch. */
  hold(h: HeldResult): void {
    this.held.set(bytesToHex(h.commitment), h);
    this.addCandidate(h.result.step, h.result.batch, h.commitment, h.from);
  }

  get(commitment: Uint8Array): HeldResult | undefined {
    return this.held.get(bytesToHex(commitment));
  }

  has(commitment: Uint8Array): boolean {
    return this.held.has(bytesToHex(commitment));
  }

  /** Records that `from` announced `commitment` for `batch` of `step` (once per commitment). */
  addCandidate(step: number, batch: BatchId, commitment: Uint8Array, from: string): void {
    let byStart = this.candidates.get(step);
    if (!byStart) this.candidates.set(step, (byStart = new Map()));
    let byEnd = byStart.get(batch.start);
    if (!byEnd) byStart.set(batch.start, (byEnd = new Map()));
    let list = byEnd.get(batch.end);
    if (!list) byEnd.set(batch.end, (list = []));
    const hex = bytesToHex(commitment);
    if (!list.some((c) => bytesToHex(c.commitment) === hex)) list.push({ commitment, from });
  }

  /** The commitments `from` announced for `batch` of `step`, in arrival order. */
  commitmentsFor(step: number, batch: BatchId, from: string): Uint8Array[] {
    return this.candidatesOf(step, batch)
      .filter((c) => c.from === from)
      .map((c) => c.commitment);
  }

  /** The first held result `from` announced for `batch` of `step` (the one witnesses vote for). */
  heldFor(step: number, batch: BatchId, from: string): HeldResult | undefined {
    for (const c of this.candidatesOf(step, batch)) {
      if (c.from !== from) continue;
      const h = this.get(c.commitment);
      if (h) return h;
    }
    return undefined;
  }

  /**
   * Drops held results and candidates of steps before `step`. Not a blanket clear: announces for the new
   * epoch's first round may already be here when a busy client first looks at the new epoch.
   */
  forgetBefore(step: number): void {
    for (const [k, h] of this.held) if (h.result.step < step) this.held.delete(k);
    for (const s of this.candidates.keys()) if (s < step) this.candidates.delete(s);
  }

  /** Numbers of held results and of steps with candidates (for tests and diagnostics). */
  get size(): { held: number; steps: number } {
    return { held: this.held.size, steps: this.candidates.size };
  }

  private candidatesOf(step: number, batch: BatchId): readonly Candidate[] {
    return this.candidates.get(step)?.get(batch.start)?.get(batch.end) ?? [];
  }
}
