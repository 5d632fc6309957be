// Attack simulations for tests, benchmarks and `node-trainer local-testnet --adversary`: an honest Client
// whose coordinator link, data or checkpoint store is wrapped so that what leaves it is what an attacker
// would send. Everything an adversary sends is properly signed with its own key — the point is to check that
// the protocol (admission, witnesses, verification, parameter-hash agreement) refuses or catches it.
import {
  currentRound,
  decodeSignedResult,
  encodeSignedResult,
  encodeTrainingResult,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  signAnnounce,
  signResult,
  type Announce,
  type CoordinatorState,
  type DistroResult,
  type TrainingResult,
  type Verdict,
  type WitnessMessage,
} from '@meshtrain/core';
import { packCodes, unpackCodes } from '@meshtrain/distro';
import type { Checkpoint, CheckpointSource, CoordinatorLink, DataSource } from '../interfaces.ts';

/** What an adversarial client does; see ADVERSARY_KINDS. */
export type AdversaryKind =
  | 'random-signs'
  | 'sign-flip'
  | 'stale-replay'
  | 'other-batch'
  | 'dense'
  | 'wrong-shape'
  | 'equivocate'
  | 'lying-witness'
  | 'no-upload'
  | 'poison-checkpoint'
  | 'every-third'
  | 'lying-verifier';

export const ADVERSARY_KINDS: Readonly<Record<AdversaryKind, string>> = {
  'random-signs': 'sends results with random signs (no training behind them)',
  'sign-flip': 'sends its honest results with every sign flipped',
  'stale-replay': "sends its previous round's result again for each new batch",
  'other-batch': 'trains honestly, but on other samples than its assigned batch',
  dense: 'sends every coefficient of every chunk instead of the top-k',
  'wrong-shape': 'sends results with a tensor missing',
  equivocate: 'sends a second, different result for each batch after the first',
  'lying-witness': 'attests nothing (an all-zero attestation) and accuses every trainer it can',
  'no-upload': 'is the designated checkpoint uploader that never uploads',
  'poison-checkpoint': 'reports a made-up parameter hash and uploads made-up parameters',
  'every-third': 'trains honestly, but sends random signs instead of every third result',
  'lying-verifier':
    'trains honestly, but fails every result it verifies conclusively (its fellow colluders’ excepted)',
};

/** Deterministic randomness for an adversary (xorshift32), so a run can be reproduced. */
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_0000_0000;
  };
}

function mapSigns(t: DistroResult, f: (negative: boolean, i: number) => boolean): DistroResult {
  if (t.values.kind === 'quant') {
    // SparseLoCo's n-bit codes: bit 0 of each code is its sign, the level bits stay.
    const { bits } = t.values;
    const codes = unpackCodes(t.values.codes, bits, t.indices.length).map(
      (c, i) => (c & ~1) | (f((c & 1) === 1, i) ? 1 : 0),
    );
    return { ...t, values: { ...t.values, codes: packCodes(codes, bits) } };
  }
  if (t.values.kind !== 'sign') return t;
  const count = t.values.count;
  const bits = new Uint8Array(t.values.bits.length);
  for (let i = 0; i < count; i++) {
    const neg = ((t.values.bits[i >> 3] as number) >> (i & 7)) & 1;
    if (f(neg === 1, i)) bits[i >> 3]! |= 1 << (i & 7);
  }
  return { ...t, values: { kind: 'sign', bits, count } };
}

/** Every coefficient index of every chunk (what a "dense" result would carry), with positive signs (level 0). */
function densify(t: DistroResult): DistroResult {
  let elements = 1;
  for (const d of t.xshape) elements *= d;
  const chunks = elements / t.totalk;
  const n = chunks * t.totalk;
  const indices =
    t.totalk <= 256 ? new Uint8Array(n) : t.totalk <= 65_536 ? new Uint16Array(n) : new Uint32Array(n);
  for (let i = 0; i < n; i++) indices[i] = i % t.totalk;
  if (t.values.kind === 'quant') {
    const { bits } = t.values;
    return { ...t, indices, values: { ...t.values, codes: new Uint8Array(Math.ceil((n * bits) / 8)) } };
  }
  return { ...t, indices, values: { kind: 'sign', bits: new Uint8Array(Math.ceil(n / 8)), count: n } };
}

/** `t` with every sign (SparseLoCo: every code's sign bit) drawn at random: the no-work result. */
export function randomSigns(t: DistroResult, random: () => number): DistroResult {
  return mapSigns(t, () => random() < 0.5);
}

/**
 * A verdict that fails a result conclusively whatever the verifier measured: no fingerprint bit agrees and the
 * update opposes the gradient (core's conclusiveFailure), so two of them confirm a cheat at once.
 */
export function conclusiveFail(v: Verdict): Verdict {
  return { ...v, pass: false, fingerprintAgreement: 0, updateAgreement: -1 };
}

/** A verdict that passes a result with perfect agreement, whatever the result is. */
export function perfectPass(v: Verdict): Verdict {
  return { ...v, pass: true, fingerprintAgreement: 1, updateAgreement: 1 };
}

/** The trainer of round `step`'s result for `batch` in `state` (an id), or null when the round is gone. */
export function trainerOf(
  state: CoordinatorState,
  step: number,
  batch: { start: number; end: number },
): string | null {
  const cur = currentRound(state);
  if (!cur) return null;
  for (let h = cur.height; h >= Math.max(0, cur.height - 2); h--) {
    const round = roundAtHeight(state, h);
    if (round?.step !== step) continue;
    const a = roundAssignments(state, round).find(
      (x) => x.batch.start === batch.start && x.batch.end === batch.end,
    );
    return a?.id ?? null;
  }
  return null;
}

/** The signed frame and announce for `result`, as the client would have made them. */
export function sealed(
  secretKey: Uint8Array,
  result: TrainingResult,
): { frame: Uint8Array; announce: Announce } {
  const envelope = signResult(secretKey, result);
  const frame = encodeSignedResult({ envelope, result });
  const announce = signAnnounce(secretKey, {
    runId: result.runId,
    step: result.step,
    batch: result.batch,
    commitment: envelope.commitment,
    size: encodeTrainingResult(result).length,
  });
  return { frame, announce };
}

export interface AdversaryParts {
  link: CoordinatorLink;
  data: DataSource;
  checkpoints: CheckpointSource;
}

export interface AdversaryOptions {
  seed?: number;
  /** The first this many results are sent untouched (a cheater that earns trust first). */
  honestRounds?: number;
  /** other-batch: how far from its assigned samples it trains. */
  sampleShift?: number;
  /** lying-verifier: ids whose results it passes (its fellow colluders); every other result it fails. */
  colluders?: ReadonlySet<string>;
  /** Told the commitment of every result it sends that is not honest work for its batch (for accounting). */
  onFabricated?: (commitment: Uint8Array) => void;
}

/** What one adversary remembers between the calls of its wrapped link. */
interface AdversaryState {
  readonly kind: AdversaryKind;
  readonly secretKey: Uint8Array;
  readonly options: AdversaryOptions;
  readonly link: CoordinatorLink;
  readonly random: () => number;
  readonly honestRounds: number;
  /** Results submitted so far, honest ones included. */
  sent: number;
  previous: TrainingResult | null;
  latest: CoordinatorState | null;
}

/** The result `kind` sends instead of `r`, or null when it sends `r` itself. */
function tamper(st: AdversaryState, r: TrainingResult): TrainingResult | null {
  switch (st.kind) {
    case 'random-signs':
      return { ...r, tensors: r.tensors.map((t) => randomSigns(t, st.random)) };
    case 'every-third':
      // `sent` already counts this result: its own results 3, 6, 9, … are fabricated.
      return (st.sent - st.honestRounds) % 3 === 0
        ? { ...r, tensors: r.tensors.map((t) => randomSigns(t, st.random)) }
        : null;
    case 'sign-flip':
      return { ...r, tensors: r.tensors.map((t) => mapSigns(t, (neg) => !neg)) };
    case 'stale-replay':
      return st.previous
        ? { ...st.previous, step: r.step, batch: r.batch, trainerNonce: r.trainerNonce }
        : null;
    case 'dense':
      return { ...r, tensors: r.tensors.map(densify) };
    case 'wrong-shape':
      return { ...r, tensors: r.tensors.slice(1) };
    default:
      return null;
  }
}

/** Accuses every trainer of round h−2 (what a lying witness of round h would do). */
async function accuseAll(st: AdversaryState): Promise<void> {
  const state = st.latest;
  const cur = state ? currentRound(state) : null;
  const judged = state && cur ? roundAtHeight(state, cur.height - 2) : null;
  if (!state || !cur || !judged) return;
  const reports = roundAssignments(state, judged)
    .filter((a) => a.id !== st.link.clientId)
    .map((a) => ({
      clientIndex: a.client_index,
      committeeProof: roundSelection(judged).committeeProof(a.index),
    }));
  if (reports.length > 0) await st.link.submitHealthCheck({ step: cur.step, reports }).catch(() => {});
}

async function submitResult(st: AdversaryState, frame: Uint8Array, announce: Announce): Promise<void> {
  const { link, options } = st;
  const honest = decodeSignedResult(frame).result;
  const mine = st.sent++ >= st.honestRounds;
  const bad = mine ? tamper(st, honest) : null;
  st.previous = honest;
  if (!bad) {
    // Honest work, but on other samples than the batch it names.
    if (mine && st.kind === 'other-batch') options.onFabricated?.(announce.commitment);
    await link.submitResult(frame, announce);
    if (mine && st.kind === 'equivocate') {
      const twin = sealed(st.secretKey, { ...honest, trainerNonce: honest.trainerNonce + 1_000_000 });
      await link.submitResult(twin.frame, twin.announce);
    }
    return;
  }
  const s = sealed(st.secretKey, bad);
  options.onFabricated?.(s.announce.commitment);
  await link.submitResult(s.frame, s.announce);
}

async function submitVerdict(st: AdversaryState, v: Verdict): Promise<void> {
  if (st.kind !== 'lying-verifier') return st.link.submitVerdict(v);
  const trainer = st.latest ? trainerOf(st.latest, v.step, v.batch) : null;
  const fellow = trainer !== null && (st.options.colluders?.has(trainer) ?? false);
  await st.link.submitVerdict(fellow ? perfectPass(v) : conclusiveFail(v));
}

async function submitWitness(st: AdversaryState, w: WitnessMessage): Promise<void> {
  if (st.kind !== 'lying-witness') return st.link.submitWitness(w);
  // Claims nothing: every slot of the attested round left out (an attempt to veto every result).
  await st.link.submitWitness({ ...w, attested: new Uint8Array(w.attested.length) });
  await accuseAll(st);
}

async function reportParamHash(
  st: AdversaryState,
  epoch: number,
  step: number,
  hash: Uint8Array,
): Promise<void> {
  const { link } = st;
  if (st.kind !== 'poison-checkpoint') return link.reportParamHash(epoch, step, hash);
  // A made-up hash for the real epoch end, and one for an epoch and step the run never reached.
  const fake = Uint8Array.from(hash, (b) => b ^ 0x5a);
  await link.reportParamHash(epoch + 5, step + 1_000_000, fake).catch(() => {});
  // A poisoner ignores being told its replica diverged (the majority's hash differs): it goes on to upload.
  await link.reportParamHash(epoch, step, fake).catch(() => {});
}

function wrapLink(st: AdversaryState): CoordinatorLink {
  const { link } = st;
  link.onState((state) => (st.latest = state));
  return {
    clientId: link.clientId,
    onState: (f) => link.onState(f),
    onAnnounce: (f) => link.onAnnounce(f),
    ...(link.onResult ? { onResult: (f: (frame: Uint8Array) => void) => link.onResult?.(f) } : {}),
    fetchResult: (c) => link.fetchResult(c),
    submitWarmupWitness: (e) => link.submitWarmupWitness(e),
    submitVerdict: (v) => submitVerdict(st, v),
    submitHealthCheck: (h) => link.submitHealthCheck(h),
    rejoin: (reason) => link.rejoin(reason),
    submitResult: (frame, announce) => submitResult(st, frame, announce),
    submitWitness: (w) => submitWitness(st, w),
    reportParamHash: (epoch, step, hash) => reportParamHash(st, epoch, step, hash),
  };
}

function wrapData(kind: AdversaryKind, data: DataSource, options: AdversaryOptions): DataSource {
  if (kind !== 'other-batch') return data;
  const shift = options.sampleShift ?? 997;
  return { samples: (start, end) => data.samples(start + shift, end + shift) };
}

function wrapCheckpoints(kind: AdversaryKind, checkpoints: CheckpointSource): CheckpointSource {
  const wrapped: CheckpointSource = { load: (step) => checkpoints.load(step) };
  if (checkpoints.has) wrapped.has = checkpoints.has.bind(checkpoints);
  if (checkpoints.upload) wrapped.upload = checkpoints.upload.bind(checkpoints);
  if (kind === 'no-upload') wrapped.upload = async () => {};
  else if (kind === 'poison-checkpoint' && checkpoints.upload) {
    const upload = checkpoints.upload.bind(checkpoints);
    wrapped.upload = async (ck: Checkpoint) => {
      const params = new Map([...ck.params].map(([k, v]) => [k, Float32Array.from(v, (x) => -x)]));
      // Made-up parameters, and the same for a step the run never reached (it would sort newest).
      await upload({ ...ck, step: ck.step + 1_000_000, epoch: ck.epoch + 5, params }).catch(() => {});
      await upload({ ...ck, params });
    };
  }
  return wrapped;
}

/**
 * Wraps an honest client's parts so it behaves as `kind`; its later cheating must still be caught and undone
 * whatever `honestRounds` it sent first.
 */
export function adversary(
  kind: AdversaryKind,
  secretKey: Uint8Array,
  parts: AdversaryParts,
  options: AdversaryOptions = {},
): AdversaryParts {
  const st: AdversaryState = {
    kind,
    secretKey,
    options,
    link: parts.link,
    random: rng(options.seed ?? 1),
    honestRounds: options.honestRounds ?? 0,
    sent: 0,
    previous: null,
    latest: null,
  };
  return {
    link: wrapLink(st),
    data: wrapData(kind, parts.data, options),
    checkpoints: wrapCheckpoints(kind, parts.checkpoints),
  };
}
