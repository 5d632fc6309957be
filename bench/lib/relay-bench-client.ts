// One process of bench/relay.ts's clients: `count` real coordinator sessions on real WebSockets, each an honest
// client speaking the real frames — Join (signed, answering the relay's challenge and puzzle), WarmupWitness,
// a SignedResult that passes core's admission for the run's model (built from its result spec, with the
// gradient fingerprint when the run verifies), Witness with a real attestation of the previous round's admitted
// results, Verdicts for the results it is drawn to verify, HealthChecks when core says there is someone to
// report, Leave — with training replaced by a fixed wait. The sessions of a process see the same frames, so one
// of them (the leader) keeps the replica every session acts on: it replays the deltas with core's
// applyStateDelta and checks the relay's state hashes. Every session counts the bytes it receives, by round.
//
// Started by bench/relay.ts with fork(): argv[2] is the JSON of BenchClientConfig; it reports with
// process.send ({type: 'stats', …} every second) and obeys {type: 'leave'} and {type: 'join', count}.
import { createHash, createPrivateKey, sign as nodeSign } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import {
  admittedSlots,
  applyLightDelta,
  applyStateDelta,
  attestationOf,
  canonicalStateBytes,
  currentRound,
  decodeFrame,
  deltaEndSeq,
  encodeHealthCheck,
  encodeJoin,
  encodeLeave,
  encodeSignedResult,
  encodeVerdict,
  encodeWarmupWitness,
  encodeWitness,
  encodeWireEvent,
  domainTag,
  resultCommitment,
  hexToBytes,
  identityFromSeed,
  roundAdmitted,
  roundListAddress,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  sha256Concat,
  signJoin,
  unhealthyTrainers,
  verificationTasks,
  bytesToHex,
  packSigns,
  peerIdOfKey,
  type CoordinatorState,
  type Identity,
  type ResultSpec,
  type Round,
  type TrainingResult,
} from '../../packages/core/src/index.ts';
import { resultSpecForToml } from '../../apps/relay/src/run-host.ts';
import { LIST_SEEDS } from '../../packages/client/src/relay-link-replica.ts';

export interface BenchClientConfig {
  url: string;
  runId: string;
  toml: string;
  /** Identity numbers first .. first + count − 1 (distinct across processes). */
  first: number;
  count: number;
  /** The stand-in for training: a result goes out this long after its round was seen (plus a spread). */
  trainMs: number;
  /** Sessions of this process that may be waiting for their Join's Ack at once (the relay allows 256 per address). */
  maxPendingJoins: number;
  /**
   * Follow the run as light replicas (`?replica=light`, LightDelta frames): witnesses attest the previous
   * round's admitted slots from its recorded outcome, and a verifier derives the commitment of the result it
   * is drawn to check the way it would after downloading it (the bench's results are a function of trainer,
   * step and batch), so it needs every identity of the fleet: `fleet`.
   */
  light?: boolean;
  fleet?: { first: number; count: number };
}

export interface BenchClientStats {
  type: 'stats';
  joined: number;
  /** Bytes received by all sessions of the process, by the round step they arrived in (0: before any). */
  bytesByStep: Record<number, number>;
  bytesOut: number;
  /** Frames sent, by kind, and the relay's refusals, by `kind:code`. */
  sent: Record<string, number>;
  refusals: Record<string, number>;
  hashChecks: number;
  hashMismatches: number;
  gaps: number;
  /**
   * What one session received in StateDelta frames, by round step and by what the bytes carried: each
   * event type (its encoding plus its head, time and entropy), `frame` (headers, hashes), `snapshot`.
   */
  stateBytesByStep: Record<number, Record<string, number>>;
  step: number;
  runState: string;
  closedByRelay: number;
  /**
   * Light replicas: admitted lists fetched from the relay's HTTP route by the sessions drawn as the run's
   * seeds (as RelayLink's replica draws them: LIST_SEEDS in expectation per list), their body bytes by
   * round step, lists whose bytes did not hash to their address, and the lists the other sessions would take
   * from peers (the bench has no libp2p; they are counted, not fetched).
   */
  listFetches: number;
  listBytesByStep: Record<number, number>;
  listMismatches: number;
  listsFromPeers: number;
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as BenchClientConfig;
const spec: ResultSpec | null = resultSpecForToml(cfg.toml);
if (!spec) throw new Error('the run has no DisTrO model spec');

interface Session {
  n: number;
  id: Identity;
  /** The same key for OpenSSL: the bench's clients sign natively so their CPU does not crowd the relay's. */
  key: KeyObject;
  hex: string;
  ws: WebSocket | null;
  sent: number;
  kinds: Map<number, string>;
  joined: boolean;
  left: boolean;
  warmupEpoch: number;
  results: Set<number>;
  witnessed: Set<number>;
  healthChecked: Set<number>;
  verdicts: Set<string>;
}

const sessions: Session[] = [];
const stats: BenchClientStats = {
  type: 'stats',
  joined: 0,
  bytesByStep: {},
  bytesOut: 0,
  sent: {},
  refusals: {},
  hashChecks: 0,
  hashMismatches: 0,
  gaps: 0,
  stateBytesByStep: {},
  step: 0,
  runState: '',
  closedByRelay: 0,
  listFetches: 0,
  listBytesByStep: {},
  listMismatches: 0,
  listsFromPeers: 0,
};
/** Admitted lists (by address) this process has drawn its seeds for. */
const listsSeen = new Set<string>();
let leader: Session | null = null;
let state: CoordinatorState | null = null;
let seq = -1;
let pendingJoins = 0;
const joinQueue: Session[] = [];

function identityOf(n: number): Identity {
  const seed = new Uint8Array(32);
  new DataView(seed.buffer).setUint32(0, n, true);
  seed[31] = 0xbe;
  return identityFromSeed(seed);
}

function send(s: Session, kind: string, frame: Uint8Array): void {
  if (!s.ws || s.ws.readyState !== WebSocket.OPEN) return;
  s.sent++;
  s.kinds.set(s.sent, kind);
  s.ws.send(frame as Uint8Array<ArrayBuffer>);
  stats.bytesOut += frame.length;
  stats.sent[kind] = (stats.sent[kind] ?? 0) + 1;
}

function stateHash(s: CoordinatorState): Uint8Array {
  return new Uint8Array(createHash('sha256').update(canonicalStateBytes(s)).digest());
}

function count(kind: string, bytes: number): void {
  const step = state?.progress.step ?? 0;
  const per = (stats.stateBytesByStep[step] ??= {});
  per[kind] = (per[kind] ?? 0) + bytes;
}

function onLeaderFrame(m: ReturnType<typeof decodeFrame>, size: number): void {
  if (m.kind === 'stateSnapshot') count('snapshot', size);
  if (m.kind === 'lightDelta') {
    count('lightDelta', size);
    if (!state) return;
    const out = applyLightDelta(state, seq, m.message);
    if (out.gap) {
      stats.gaps++;
      return;
    }
    state = out.state;
    seq = out.seq;
    if (m.message.stateHash) {
      stats.hashChecks++;
      if (bytesToHex(stateHash(state)) !== bytesToHex(m.message.stateHash)) stats.hashMismatches++;
    }
    return;
  }
  if (m.kind === 'stateDelta') {
    let events = 0;
    for (const t of m.message.transitions) {
      const n = encodeWireEvent(t.event).length + 1 + (t.entropy ? t.entropy.length + 1 : 0);
      events += n;
      count(t.event.type, n);
    }
    count('frame', size - events);
  }
  if (m.kind === 'stateSnapshot') {
    if (m.message.seq >= seq) {
      state = m.message.state;
      seq = m.message.seq;
    }
    return;
  }
  if (m.kind !== 'stateDelta' || !state) return;
  const d = m.message;
  if (deltaEndSeq(d) <= seq) return;
  const out = applyStateDelta(state, seq, d);
  if (out.gap) {
    stats.gaps++;
    return;
  }
  state = out.state;
  seq = out.seq;
  if (d.stateHash) {
    stats.hashChecks++;
    if (bytesToHex(stateHash(state)) !== bytesToHex(d.stateHash)) stats.hashMismatches++;
  }
}

function open(s: Session): void {
  const url = `${cfg.url.replace(/^http/, 'ws')}/ws/runs/${encodeURIComponent(cfg.runId)}${cfg.light ? '?replica=light' : ''}`;
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  s.ws = ws;
  pendingJoins++;
  let counted = true;
  const release = () => {
    if (!counted) return;
    counted = false;
    pendingJoins--;
    pumpJoins();
  };
  ws.onmessage = (ev) => {
    const bytes = new Uint8Array(ev.data as ArrayBuffer);
    const step = state?.progress.step ?? 0;
    stats.bytesByStep[step] = (stats.bytesByStep[step] ?? 0) + bytes.length;
    const type = bytes[3];
    // Acks, errors and challenges are decoded everywhere; state frames only by the leader (all get the same).
    if (type === 0x31 || type === 0x33 || type === 0x35) {
      if (s === leader) onLeaderFrame(decodeFrame(bytes), bytes.length);
      return;
    }
    const m = decodeFrame(bytes);
    if (m.kind === 'challenge') {
      const join = signJoin(
        s.id.secretKey,
        {
          runId: cfg.runId,
          p2pPeerId: peerIdOfKey(s.id.publicKey),
          deviceKind: 'bench',
          challenge: m.message.challenge,
        },
        m.message.powBits,
      );
      send(s, 'join', encodeJoin(join));
      return;
    }
    if (m.kind === 'ack' || m.kind === 'error') {
      const kind = s.kinds.get(m.message.requestId);
      s.kinds.delete(m.message.requestId);
      if (m.kind === 'error') {
        const key = `${kind ?? 'notice'}:${m.message.code}`;
        stats.refusals[key] = (stats.refusals[key] ?? 0) + 1;
      }
      if (kind === 'join') {
        release();
        if (m.kind === 'ack') {
          s.joined = true;
          stats.joined++;
          leader ??= s;
        }
      }
    }
  };
  ws.onclose = () => {
    release();
    if (!s.left) stats.closedByRelay++;
    s.ws = null;
    if (s === leader) leader = sessions.find((x) => x.joined && x.ws && x !== s) ?? null;
  };
  ws.onerror = () => {};
}

function pumpJoins(): void {
  while (pendingJoins < cfg.maxPendingJoins && joinQueue.length > 0) open(joinQueue.shift()!);
}

function addSessions(count: number, from: number): void {
  for (let i = 0; i < count; i++) {
    const n = from + i;
    const id = identityOf(n);
    const s: Session = {
      n,
      id,
      key: createPrivateKey({
        key: Buffer.concat([PKCS8_ED25519, id.secretKey]),
        format: 'der',
        type: 'pkcs8',
      }),
      hex: bytesToHex(id.publicKey),
      ws: null,
      sent: 0,
      kinds: new Map(),
      joined: false,
      left: false,
      warmupEpoch: -1,
      results: new Set(),
      witnessed: new Set(),
      healthChecked: new Set(),
      verdicts: new Set(),
    };
    sessions.push(s);
    joinQueue.push(s);
  }
  pumpJoins();
}

/** PKCS#8 DER prefix of an Ed25519 private key (RFC 8410); the 32-byte seed follows. */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const RESULT_SIGNATURE_TAG = domainTag('meshtrain/v1/result-signature');

/**
 * core's signResult, with the signature made by OpenSSL (Ed25519 is deterministic: the same bytes). The relay
 * verifies every one, so a difference would show up as refusals in the bench's output.
 */
function signResultNative(x: Session, result: TrainingResult) {
  const commitment = resultCommitment(result);
  const message = Buffer.concat([RESULT_SIGNATURE_TAG, commitment]);
  return { from: x.id.publicKey, commitment, signature: new Uint8Array(nodeSign(null, message, x.key)) };
}

/** A training result that fits the run's model (core's checkResultShape), distinct per trainer and batch. */
function resultFor(step: number, batch: { start: number; end: number }, salt: number): TrainingResult {
  return {
    runId: cfg.runId,
    step,
    batch,
    trainerNonce: step,
    ...(spec!.fingerprintBytes > 0
      ? { fingerprint: new Uint8Array(spec!.fingerprintBytes).fill((step + salt) & 0xff) }
      : {}),
    tensors: spec!.tensors.map((t) => {
      const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
      const n = chunks * t.k;
      const indices = t.totalk <= 256 ? new Uint8Array(n) : new Uint16Array(n);
      for (let i = 0; i < n; i++) indices[i] = (i + salt) % t.k;
      const signs = new Float32Array(n);
      for (let i = 0; i < n; i++) signs[i] = (i * 7 + step + salt) % 3 === 0 ? -1 : 1;
      return { xshape: [...t.xshape], totalk: t.totalk, indices, values: packSigns(signs) };
    }),
  };
}

/** Identity number of each key of the fleet (light verifiers only; built on first use). */
let fleetNumbers: Map<string, number> | null = null;

/**
 * The commitment of the bench result that trainer `id` sends for `batch` of `step`: what a light verifier
 * would read from the result it downloads (the bench downloads none). Null for a key outside the fleet.
 */
function commitmentOf(step: number, batch: { start: number; end: number }, id: string): string | null {
  if (!fleetNumbers) {
    const f = cfg.fleet ?? { first: cfg.first, count: cfg.count };
    fleetNumbers = new Map();
    for (let n = f.first; n < f.first + f.count; n++)
      fleetNumbers.set(bytesToHex(identityOf(n).publicKey), n);
  }
  const n = fleetNumbers.get(id);
  return n === undefined ? null : bytesToHex(resultCommitment(resultFor(step, batch, n)));
}

// --- per-state lookups, rebuilt when the arrays they index change --------------------------------------

const clientIndexOf = new WeakMap<readonly unknown[], Map<string, number>>();
function clientIndex(s: CoordinatorState, hex: string): number {
  let m = clientIndexOf.get(s.epoch.clients);
  if (!m) {
    m = new Map(s.epoch.clients.map((c, i) => [c.id, i]));
    clientIndexOf.set(s.epoch.clients, m);
  }
  return m.get(hex) ?? -1;
}

interface RoundView {
  rosterIndex: Map<number, number>;
  witnesses: Set<number>;
  slotOf: Map<number, number>;
}
const views = new WeakMap<readonly number[], RoundView>();
function view(s: CoordinatorState, round: Round): RoundView {
  let v = views.get(round.roster);
  if (!v) {
    const rosterIndex = new Map(round.roster.map((ci, i) => [ci, i]));
    const witnesses = new Set(roundSelection(round).witnesses());
    const slotOf = new Map(roundAssignments(s, round).map((a, slot) => [a.client_index, slot]));
    v = { rosterIndex, witnesses, slotOf };
    views.set(round.roster, v);
  }
  return v;
}

let roundKey = '';
let roundSeenAt = 0;

/**
 * A light replica needs each closed round's admitted list: each session is a seed with chance
 * LIST_SEEDS / clients and fetches it from the relay (timed into the round it was seen in); the others take
 * it from peers, which the bench counts without fetching.
 */
function fetchLists(s: CoordinatorState): void {
  const clients = Math.max(1, s.epoch.clients.length);
  for (const round of s.epoch.rounds) {
    const address = round ? roundListAddress(s.run_id, round) : undefined;
    if (!round || !address || listsSeen.has(address)) continue;
    listsSeen.add(address);
    const step = s.progress.step;
    for (const x of sessions) {
      if (!x.joined || x.left) continue;
      if (Math.random() >= LIST_SEEDS / clients) {
        stats.listsFromPeers++;
        continue;
      }
      const url = `${cfg.url}/api/runs/${encodeURIComponent(cfg.runId)}/admitted/${address}`;
      void fetch(url)
        .then(async (res) => {
          const body = new Uint8Array(await res.arrayBuffer());
          stats.listFetches++;
          stats.listBytesByStep[step] = (stats.listBytesByStep[step] ?? 0) + body.length;
          if (!res.ok || createHash('sha256').update(body).digest('hex') !== address) stats.listMismatches++;
        })
        .catch(() => {
          stats.listMismatches++;
        });
    }
  }
  if (listsSeen.size > 64) listsSeen.delete(listsSeen.values().next().value as string);
}

function act(): void {
  const s = state;
  if (!s) return;
  if (cfg.light) fetchLists(s);
  stats.step = s.progress.step;
  stats.runState = s.run_state;
  const now = Date.now();
  if (s.run_state === 'Warmup') {
    for (const x of sessions) {
      if (!x.joined || x.left || x.warmupEpoch === s.progress.epoch) continue;
      const ci = clientIndex(s, x.hex);
      if (ci < 0 || s.epoch.clients[ci]!.state !== 'Healthy') continue;
      x.warmupEpoch = s.progress.epoch;
      send(x, 'warmupWitness', encodeWarmupWitness({ runId: cfg.runId, epoch: s.progress.epoch }));
    }
    return;
  }
  if (s.run_state !== 'RoundTrain' && s.run_state !== 'RoundWitness') return;
  const round = currentRound(s);
  if (!round) return;
  const key = `${s.progress.epoch}:${round.step}`;
  if (key !== roundKey) {
    roundKey = key;
    roundSeenAt = now;
  }
  const v = view(s, round);
  const assignments = roundAssignments(s, round);
  const admitted = roundAdmitted(round);
  // A light replica does not see results arrive, only that every trainer published (core's `filled`).
  const allIn = cfg.light
    ? round.filled === true
    : assignments.every((_, slot) => (admitted[slot] ?? null) !== null);
  const prev = roundAtHeight(s, round.height - 1);
  const prevAdmittedSlots = prev && cfg.light ? admittedSlots(s, prev.height) : null;
  const tasks = prev && round.verification_percent > 0 ? verificationTasks(s, prev, round) : [];
  for (const x of sessions) {
    if (!x.joined || x.left || !x.ws) continue;
    const ci = clientIndex(s, x.hex);
    if (ci < 0 || s.epoch.clients[ci]!.state !== 'Healthy') continue;
    const ri = v.rosterIndex.get(ci);
    if (ri === undefined) continue;
    // Verifiers check the previous round's sampled results first (before training, as clients do).
    for (const t of tasks) {
      const tag = `${prev!.step}:${t.slot}`;
      if (x.verdicts.has(tag) || !t.verifiers.includes(x.hex)) continue;
      const c = cfg.light
        ? prevAdmittedSlots?.[t.slot] === true
          ? commitmentOf(prev!.step, t.trainer.batch, t.trainer.id)
          : null
        : (roundAdmitted(prev!)[t.slot] ?? null);
      if (c === null) continue;
      x.verdicts.add(tag);
      send(
        x,
        'verdict',
        encodeVerdict({
          runId: cfg.runId,
          step: prev!.step,
          batch: t.trainer.batch,
          commitment: hexToBytes(c),
          pass: true,
          fingerprintAgreement: 1,
          updateAgreement: 1,
        }),
      );
    }
    const witness = v.witnesses.has(ri);
    if (witness && round.height >= 2 && !x.healthChecked.has(round.step)) {
      x.healthChecked.add(round.step);
      const judged = roundAtHeight(s, round.height - 2);
      const reports = judged
        ? unhealthyTrainers(s).map((a) => ({
            clientIndex: a.client_index,
            committeeProof: roundSelection(judged).committeeProof(a.index),
          }))
        : [];
      if (reports.length > 0) send(x, 'healthCheck', encodeHealthCheck({ step: round.step, reports }));
    }
    // The "training": a fixed wait, spread over half of it so results arrive as a stream, not at once.
    const slot = v.slotOf.get(ci);
    const readyAt = roundSeenAt + cfg.trainMs + ((x.n * 37) % 100) * (cfg.trainMs / 200);
    if (slot !== undefined && !x.results.has(round.step) && now >= readyAt) {
      x.results.add(round.step);
      const a = assignments[slot]!;
      const result = resultFor(round.step, a.batch, x.n);
      const envelope = signResultNative(x, result);
      send(x, 'signedResult', encodeSignedResult({ envelope, result }));
    }
    // A witness reports once this round's trainers have published (or it has waited long enough), with its
    // attestation of the previous round's results: its admitted record is final (the round has ended).
    const waited = now >= roundSeenAt + cfg.trainMs * 2 + 5000;
    if (
      witness &&
      !x.witnessed.has(round.step) &&
      now >= readyAt &&
      (allIn || waited || s.run_state === 'RoundWitness')
    ) {
      x.witnessed.add(round.step);
      const commitments: Uint8Array[] = [];
      let attested: Uint8Array = new Uint8Array(0);
      if (prev && cfg.light) {
        // The recorded outcome of the previous round names its admitted slots, and its list address stands
        // for the commitments (the broadcast hash is informational).
        attested = attestationOf(roundAssignments(s, prev).length, (i) => prevAdmittedSlots?.[i] === true);
        const address = roundListAddress(s.run_id, prev);
        if (address) commitments.push(hexToBytes(address));
      } else if (prev) {
        // Results are not downloaded here: the bench's witnesses attest what the relay admitted.
        const prevAdmitted = roundAdmitted(prev);
        attested = attestationOf(roundAssignments(s, prev).length, (i) => (prevAdmitted[i] ?? null) !== null);
        for (const c of prevAdmitted) if (c !== null) commitments.push(hexToBytes(c));
      }
      send(
        x,
        'witness',
        encodeWitness({
          step: round.step,
          proof: roundSelection(round).witnessProof(ri),
          attested,
          broadcastMerkle: sha256Concat(...commitments),
          metadata: { loss: 3, tokensPerSec: 1000, bandwidth: 1e6 },
        }),
      );
    }
  }
}

function leaveAll(): void {
  for (const x of sessions) {
    if (!x.ws || x.left) continue;
    send(x, 'leave', encodeLeave({ runId: cfg.runId, reason: 'bench over' }));
    x.left = true;
  }
  setTimeout(() => {
    for (const x of sessions) x.ws?.close();
  }, 500);
}

/** Leaves with `count` sessions (the last joined ones first) and closes them. */
function leaveSome(count: number): void {
  const live = sessions.filter((x) => x.joined && !x.left && x.ws);
  for (const x of live.slice(-count)) {
    send(x, 'leave', encodeLeave({ runId: cfg.runId, reason: 'bench' }));
    x.left = true;
    const ws = x.ws;
    setTimeout(() => ws?.close(), 200);
  }
}

process.on('message', (m: { type: string; count?: number; first?: number }) => {
  if (m.type === 'leave') leaveAll();
  if (m.type === 'leaveSome') leaveSome(m.count ?? 1);
  if (m.type === 'join') addSessions(m.count ?? 1, m.first ?? cfg.first + sessions.length);
  if (m.type === 'stats') process.send?.(stats);
  if (m.type === 'exit') process.exit(0);
});

setInterval(act, 50);
setInterval(() => process.send?.(stats), 1000);
addSessions(cfg.count, cfg.first);
