// Colluding identities that do no work (an attack simulation, like adversary.ts): many keys held by one
// attacker, each a member of the run, none with a model. Every round each one
//  - sends a fabricated result for its batch: well-formed for the run (core's ResultSpec: every tensor, the
//    top-k entries per chunk, the run's value kind, a fingerprint of the right length), with random signs;
//  - as a witness, attests its fellows' admitted results, and the honest ones' too unless it vetoes them;
//  - as a verifier, passes its fellows' results and fails every other result conclusively.
// It signs everything with each identity's own key, so what the protocol sees is exactly what a real
// attacker with these keys could send.
import {
  attestationOf,
  currentRound,
  hexToBytes,
  isWitness,
  rosterIndexOf,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  sha256Concat,
  verificationTasks,
  type CoordinatorState,
  type DistroResult,
  type ResultSpec,
  type Round,
  type TensorSpec,
  type TrainingResult,
} from '@meshtrain/core';
import { packCodes } from '@meshtrain/distro';
import type { CoordinatorLink } from '../interfaces.ts';
import { conclusiveFail, perfectPass, randomSigns, rng, sealed } from './adversary.ts';

export interface CollusionOptions {
  runId: string;
  /** What a result of the run looks like (core's runResultSpec for the run's model and optimizer). */
  spec: ResultSpec;
  /** As a witness, leave honest results unattested (a veto needs enough witness slots to work). */
  vetoHonest: boolean;
  seed?: number;
  /** Refusals and other failures of what a member sent. */
  onError?: (message: string) => void;
  /** Told the commitment of every result a member sends (all fabricated). */
  onFabricated?: (commitment: Uint8Array) => void;
}

/** What the colluders sent, for the caller's report. */
export interface CollusionCounts {
  results: number;
  witnesses: number;
  verdictsPassed: number;
  verdictsFailed: number;
}

interface Member {
  link: CoordinatorLink;
  secretKey: Uint8Array;
  sentSteps: Set<number>;
  witnessedSteps: Set<number>;
  verifiedHeight: number;
  nonce: number;
}

function indexArray(n: number, totalk: number): Uint8Array | Uint16Array | Uint32Array {
  return totalk <= 256 ? new Uint8Array(n) : totalk <= 65_536 ? new Uint16Array(n) : new Uint32Array(n);
}

/** One tensor of `spec` with k distinct entries per chunk at a random offset, values all positive (level 0). */
function blankTensor(t: TensorSpec, spec: ResultSpec, random: () => number): DistroResult {
  const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
  const n = chunks * t.k;
  const indices = indexArray(n, t.totalk);
  for (let c = 0; c < chunks; c++) {
    const offset = Math.floor(random() * t.totalk);
    for (let j = 0; j < t.k; j++) indices[c * t.k + j] = (offset + j) % t.totalk;
  }
  const base = { xshape: [...t.xshape], totalk: t.totalk, indices };
  if (spec.valueKind === 'f32') {
    // Magnitudes of the order of a DCT coefficient of a small model's gradient.
    return { ...base, values: { kind: 'f32', values: new Float32Array(n).fill(1e-2) } };
  }
  if (spec.valueKind === 'quant') {
    const bits = spec.bits ?? 2;
    const levels = 2 ** (bits - 1);
    const scales = new Float32Array(chunks * levels);
    for (let i = 0; i < scales.length; i++) scales[i] = 1e-3 * ((i % levels) + 1);
    const codes = packCodes(new Uint8Array(n), bits);
    return { ...base, values: { kind: 'quant', bits, scales, codes } };
  }
  return { ...base, values: { kind: 'sign', bits: new Uint8Array(Math.ceil(n / 8)), count: n } };
}

/** A result for `batch` of `step` that fits the run and carries no work: random signs, random fingerprint. */
export function fabricatedResult(
  spec: ResultSpec,
  head: Pick<TrainingResult, 'runId' | 'step' | 'batch' | 'trainerNonce'>,
  random: () => number,
): TrainingResult {
  const fingerprint = new Uint8Array(spec.fingerprintBytes);
  for (let i = 0; i < fingerprint.length; i++) fingerprint[i] = Math.floor(random() * 256);
  return {
    ...head,
    tensors: spec.tensors.map((t) => randomSigns(blankTensor(t, spec, random), random)),
    ...(fingerprint.length > 0 ? { fingerprint } : {}),
  };
}

export class Collusion {
  readonly counts: CollusionCounts = { results: 0, witnesses: 0, verdictsPassed: 0, verdictsFailed: 0 };
  private readonly o: CollusionOptions;
  private readonly random: () => number;
  private readonly members = new Map<string, Member>();

  constructor(o: CollusionOptions) {
    this.o = o;
    this.random = rng(o.seed ?? 7);
  }

  /** Adds a member: from now on it acts on every state its link delivers. */
  add(link: CoordinatorLink, secretKey: Uint8Array): void {
    const m: Member = {
      link,
      secretKey,
      sentSteps: new Set(),
      witnessedSteps: new Set(),
      verifiedHeight: -1,
      nonce: 0,
    };
    this.members.set(link.clientId, m);
    link.onState((s) => this.act(m, s));
  }

  isFellow(id: string): boolean {
    return this.members.has(id);
  }

  private act(m: Member, s: CoordinatorState): void {
    if (s.run_state !== 'RoundTrain' && s.run_state !== 'RoundWitness') return;
    const me = s.epoch.clients.find((c) => c.id === m.link.clientId);
    if (me?.state !== 'Healthy') return;
    const round = currentRound(s);
    if (!round) return;
    this.verify(m, s, round);
    if (s.run_state === 'RoundTrain') this.sendResult(m, s, round);
    this.witness(m, s, round);
  }

  private failed = (what: string) => (e: unknown) =>
    this.o.onError?.(`${what}: ${e instanceof Error ? e.message : String(e)}`);

  private sendResult(m: Member, s: CoordinatorState, round: Round): void {
    if (m.sentSteps.has(round.step)) return;
    m.sentSteps.add(round.step);
    const mine = roundAssignments(s, round).find((a) => a.id === m.link.clientId);
    if (!mine) return;
    const result = fabricatedResult(
      this.o.spec,
      {
        runId: this.o.runId,
        step: round.step,
        batch: { start: mine.batch.start, end: mine.batch.end },
        trainerNonce: ++m.nonce,
      },
      this.random,
    );
    const { frame, announce } = sealed(m.secretKey, result);
    this.counts.results++;
    this.o.onFabricated?.(announce.commitment);
    m.link.submitResult(frame, announce).catch(this.failed(`result of step ${round.step}`));
  }

  /** Verdicts on round h−1's sampled results this member was named for: fellows pass, everyone else fails. */
  private verify(m: Member, s: CoordinatorState, round: Round): void {
    if (round.height < 1 || m.verifiedHeight >= round.height) return;
    m.verifiedHeight = round.height;
    const judged = roundAtHeight(s, round.height - 1);
    if (!judged) return;
    const admitted = roundAdmitted(judged);
    for (const task of verificationTasks(s, judged, round)) {
      if (!task.verifiers.includes(m.link.clientId)) continue;
      const hex = admitted[task.slot] ?? null;
      if (hex === null) continue;
      const measured = {
        runId: this.o.runId,
        step: judged.step,
        batch: { start: task.trainer.batch.start, end: task.trainer.batch.end },
        commitment: hexToBytes(hex),
        pass: true,
        fingerprintAgreement: 1,
        updateAgreement: 1,
      };
      const fellow = this.isFellow(task.trainer.id);
      if (fellow) this.counts.verdictsPassed++;
      else this.counts.verdictsFailed++;
      m.link
        .submitVerdict(fellow ? perfectPass(measured) : conclusiveFail(measured))
        .catch(this.failed(`verdict on step ${judged.step}`));
    }
  }

  /**
   * An attestation of round h−1 as an honest witness times it (RoundTrain once every Healthy trainer of round h
   * has a result admitted, so an early quorum cuts no one's training short; else RoundWitness), voting for the
   * admitted results of its fellows and, unless it vetoes them, of everyone else.
   */
  private witness(m: Member, s: CoordinatorState, round: Round): void {
    if (m.witnessedSteps.has(round.step)) return;
    const index = rosterIndexOf(s, round, m.link.clientId);
    if (!isWitness(s, index, round)) return;
    if (s.run_state === 'RoundTrain') {
      const now = roundAdmitted(round);
      const published = roundAssignments(s, round).every(
        (a, slot) => s.epoch.clients[a.client_index]?.state !== 'Healthy' || (now[slot] ?? null) !== null,
      );
      if (!published) return;
    }
    m.witnessedSteps.add(round.step);
    const prev = roundAtHeight(s, round.height - 1);
    const slots = prev ? roundAssignments(s, prev) : [];
    const admitted = prev ? roundAdmitted(prev) : [];
    const votes = (slot: number) =>
      (admitted[slot] ?? null) !== null && (!this.o.vetoHonest || this.isFellow(slots[slot]?.id ?? ''));
    const attested = attestationOf(slots.length, votes);
    const voted = slots.flatMap((_, slot) => (votes(slot) ? [hexToBytes(admitted[slot] as string)] : []));
    this.counts.witnesses++;
    m.link
      .submitWitness({
        step: round.step,
        proof: roundSelection(round).witnessProof(index),
        attested,
        broadcastMerkle: sha256Concat(...voted),
      })
      .catch(this.failed(`witness of step ${round.step}`));
  }
}
