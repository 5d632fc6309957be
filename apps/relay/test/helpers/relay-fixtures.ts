// Shared by the relay tests: a fast run config, a WebSocket test client speaking the real wire protocol
// (it follows the state from its snapshot by replaying deltas with core's applyStateDelta), signed admin
// requests, and the scripted behaviour of an honest client (results, announces, witnesses).
import {
  applyLightDelta,
  applyStateDelta,
  attestationOf,
  bytesToHex,
  currentRound,
  DISTRO_RUN_TOML,
  decodeFrame,
  encodeAnnounce,
  encodeJoin,
  encodeSignedResult,
  encodeWarmupWitness,
  encodeWitness,
  identityFromSeed,
  packSigns,
  isWitness,
  roundAdmitted,
  roundAssignments,
  roundSelection,
  rosterIndexOf,
  roundAtHeight,
  signAnnounce,
  signJoin,
  signResult,
  encodeTrainingResult,
} from '@meshtrain/core';
import type {
  Announce,
  CoordinatorState,
  Identity,
  ResultSpec,
  TrainingResult,
  WireMessage,
  WitnessMessage,
} from '@meshtrain/core';
import { RelayLink, RelayRefusal } from '@meshtrain/client';
import { signAdminRequest } from '../../src/middleware/admin-auth.ts';
import { resultSpecForToml } from '../../src/run-host.ts';

/**
 * The default run's DisTrO variant (DISTRO_RUN_TOML: one step per round, so scripted clients send one
 * DisTrO result per round) with timers short enough for tests (rounds end when witnesses are in).
 */
export function fastRunToml(runId: string, overrides: Record<string, number | string> = {}): string {
  const values: Record<string, number | string> = {
    warmup_time: 20,
    cooldown_time: 1,
    max_round_train_time: 4,
    round_witness_time: 1,
    waiting_for_members_extra_time: 1,
    min_clients: 2,
    init_min_clients: 2,
    global_batch_size_start: 4,
    global_batch_size_end: 4,
    total_steps: 40,
    ...overrides,
  };
  let toml = DISTRO_RUN_TOML.replace('run_id = "default"', `run_id = "${runId}"`);
  for (const [k, v] of Object.entries(values)) {
    const re = new RegExp(`^${k} = .*$`, 'm');
    if (!re.test(toml)) throw new Error(`no key ${k} in the default TOML`);
    toml = toml.replace(re, `${k} = ${typeof v === 'string' ? JSON.stringify(v) : v}`);
  }
  return toml;
}

export function identity(n: number): Identity {
  const seed = new Uint8Array(32);
  seed[0] = n & 0xff;
  seed[1] = (n >> 8) & 0xff;
  seed[31] = 0x5a;
  return identityFromSeed(seed);
}

export function hexKey(id: Identity): string {
  return bytesToHex(id.publicKey);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * What HonestClient drives: a coordinator session it reads state from and sends frames on.
 * Each send resolves with null when the relay acknowledged it, else the refusal (`code: message`).
 */
export interface Participant {
  readonly id: Identity;
  readonly state: CoordinatorState | undefined;
  /** Gone for good (a raw connection that closed; a link that was closed). */
  readonly ended: boolean;
  warmupWitness(runId: string, epoch: number): Promise<string | null>;
  submitResult(f: ResultFrames): Promise<string | null>;
  submitWitness(w: WitnessMessage): Promise<string | null>;
}

function refusalOf(m: WireMessage): string | null {
  return m.kind === 'ack' ? null : JSON.stringify(m.message);
}

/** A raw WebSocket client of the coordinator session: every frame it gets is decoded and queued. */
export class TestClient implements Participant {
  readonly ws: WebSocket;
  readonly received: WireMessage[] = [];
  /** Byte length of each received frame (same order as `received`). */
  readonly sizes: number[] = [];
  readonly id: Identity;
  readonly runId: string;
  challenge: Uint8Array | undefined;
  powBits = 0;
  state: CoordinatorState | undefined;
  seq = -1;
  /** StateDelta frames that started past `seq` (none from an honest relay). */
  gaps = 0;
  closed: { code: number; reason: string } | undefined;
  sent = 0;
  private waiters: Array<() => void> = [];

  private constructor(ws: WebSocket, runId: string, id: Identity) {
    this.ws = ws;
    this.runId = runId;
    this.id = id;
    ws.binaryType = 'arraybuffer';
    ws.onmessage = (ev) => {
      if (!(ev.data instanceof ArrayBuffer)) return;
      const m = decodeFrame(new Uint8Array(ev.data));
      this.sizes.push(ev.data.byteLength);
      if (m.kind === 'challenge') {
        this.challenge = m.message.challenge;
        this.powBits = m.message.powBits;
      }
      if (m.kind === 'stateSnapshot' && m.message.seq > this.seq) {
        this.seq = m.message.seq;
        this.state = m.message.state;
      }
      if (m.kind === 'stateDelta' && this.state) {
        const out = applyStateDelta(this.state, this.seq, m.message);
        if (out.gap) this.gaps++;
        this.state = out.state;
        this.seq = out.seq;
      }
      if (m.kind === 'lightDelta' && this.state) {
        const out = applyLightDelta(this.state, this.seq, m.message);
        if (out.gap) this.gaps++;
        this.state = out.state;
        this.seq = out.seq;
      }
      this.received.push(m);
      this.wake();
    };
    ws.onclose = (ev) => {
      this.closed = { code: ev.code, reason: ev.reason };
      this.wake();
    };
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  static async open(
    baseUrl: string,
    runId: string,
    id: Identity,
    opts: { light?: boolean } = {},
  ): Promise<TestClient> {
    const query = opts.light ? '?replica=light' : '';
    const ws = new WebSocket(
      `${baseUrl.replace(/^http/, 'ws')}/ws/runs/${encodeURIComponent(runId)}${query}`,
    );
    const c = new TestClient(ws, runId, id);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error('websocket failed to open'));
    });
    return c;
  }

  /** Opens, answers the challenge and waits for the Join's reply (Ack or ControlError). */
  static async joined(
    baseUrl: string,
    runId: string,
    id: Identity,
    deviceKind = 'cpu',
    opts: { light?: boolean } = {},
  ): Promise<TestClient> {
    const c = await TestClient.open(baseUrl, runId, id, opts);
    const reply = await c.join(deviceKind);
    if (reply.kind !== 'ack') throw new Error(`join refused: ${JSON.stringify(reply.message)}`);
    await c.until(() => c.state !== undefined);
    return c;
  }

  async join(deviceKind = 'cpu', runId = this.runId): Promise<WireMessage> {
    await this.until(() => this.challenge !== undefined);
    const join = signJoin(
      this.id.secretKey,
      { runId, p2pPeerId: `peer-${hexKey(this.id).slice(0, 8)}`, deviceKind, challenge: this.challenge! },
      this.powBits,
    );
    return this.request(encodeJoin(join));
  }

  /** Waits until `pred` holds (checked on every received frame and close), or throws after `ms`. */
  async until(pred: () => boolean, ms = 10_000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  send(data: Uint8Array | string): number {
    this.ws.send(typeof data === 'string' ? data : (data as Uint8Array<ArrayBuffer>));
    return ++this.sent;
  }

  /** Sends and waits for the Ack / ControlError whose requestId is this frame's number. */
  async request(data: Uint8Array | string, ms = 10_000): Promise<WireMessage> {
    const n = this.send(data);
    let reply: WireMessage | undefined;
    await this.until(
      () => {
        reply = this.received.find(
          (m) => (m.kind === 'ack' || m.kind === 'error') && m.message.requestId === n,
        );
        return reply !== undefined || this.closed !== undefined;
      },
      ms,
      `reply to frame ${n}`,
    );
    if (!reply) throw new Error(`connection closed (${this.closed?.code}) before frame ${n} got a reply`);
    return reply;
  }

  errors(): Array<{ requestId: number; code: string; message: string }> {
    return this.received.flatMap((m) => (m.kind === 'error' ? [m.message] : []));
  }

  snapshots(): number {
    return this.received.filter((m) => m.kind === 'stateSnapshot').length;
  }

  /** State frames received: snapshots and deltas. */
  updates(): number {
    return this.received.filter((m) => m.kind === 'stateSnapshot' || m.kind === 'stateDelta').length;
  }

  close(): void {
    try {
      this.ws.close();
    } catch {
      // already closed
    }
  }

  get ended(): boolean {
    return this.closed !== undefined;
  }

  async warmupWitness(runId: string, epoch: number): Promise<string | null> {
    return refusalOf(await this.request(encodeWarmupWitness({ runId, epoch })));
  }

  async submitResult(f: ResultFrames): Promise<string | null> {
    const r = refusalOf(await this.request(f.signed));
    return r ?? refusalOf(await this.request(f.announce));
  }

  async submitWitness(w: WitnessMessage): Promise<string | null> {
    return refusalOf(await this.request(encodeWitness(w)));
  }
}

/** The training client's own RelayLink as a Participant: it reconnects and re-joins by itself. */
export class LinkParticipant implements Participant {
  readonly id: Identity;
  readonly link: RelayLink;
  state: CoordinatorState | undefined;
  private closed = false;

  constructor(
    relayUrl: string,
    runId: string,
    id: Identity,
    opts: { replica?: 'full' | 'light'; p2pPeerId?: string; listSeeds?: number } = {},
  ) {
    this.id = id;
    this.link = new RelayLink({ relayUrl, runId, secretKey: id.secretKey, deviceKind: 'cpu', ...opts });
    this.link.onState((s) => (this.state = s));
  }

  get ended(): boolean {
    return this.closed;
  }

  close(): void {
    this.closed = true;
    this.link.close();
  }

  private static async outcome(p: Promise<void>): Promise<string | null> {
    try {
      await p;
      return null;
    } catch (e) {
      if (e instanceof RelayRefusal) return `${e.code}: ${e.message}`;
      throw e;
    }
  }

  warmupWitness(_runId: string, epoch: number): Promise<string | null> {
    return LinkParticipant.outcome(this.link.submitWarmupWitness(epoch));
  }

  submitResult(f: ResultFrames): Promise<string | null> {
    return LinkParticipant.outcome(this.link.submitResult(f.signed, f.announceMessage));
  }

  submitWitness(w: WitnessMessage): Promise<string | null> {
    return LinkParticipant.outcome(this.link.submitWitness(w));
  }
}

/** Headers of a signed admin request. */
export function adminHeaders(
  id: Identity,
  method: string,
  path: string,
  body = '',
  timestamp = Date.now(),
): Record<string, string> {
  return signAdminRequest(id.secretKey, method, path, body, timestamp);
}

let tsBump = 0;
/** A signed admin request against `base` (each call gets a fresh timestamp so none is a replay). */
export async function admin(
  base: string,
  id: Identity,
  method: string,
  path: string,
  body = '',
): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers = adminHeaders(id, method, path, body, Date.now() + tsBump++);
  const res = await fetch(`${base}${path}`, { method, headers, ...(body === '' ? {} : { body }) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** The result shape of the default run's model (every fastRunToml run trains it). */
export const DEFAULT_SPEC: ResultSpec = resultSpecForToml(DISTRO_RUN_TOML)!;

/**
 * A training result for `batch` of `step` that fits the run's model (what the relay admits): k entries per
 * chunk with signs derived from `salt`, so two calls with different salts give two different results.
 */
export function tinyResult(
  runId: string,
  step: number,
  batch: { start: number; end: number },
  salt = 0,
  /** Entries per chunk instead of the run's k (e.g. every coefficient: a "dense" result). */
  perChunk?: number,
): TrainingResult {
  return {
    runId,
    step,
    batch,
    trainerNonce: step,
    ...(DEFAULT_SPEC.fingerprintBytes > 0
      ? { fingerprint: new Uint8Array(DEFAULT_SPEC.fingerprintBytes).fill((step + salt) & 0xff) }
      : {}),
    tensors: DEFAULT_SPEC.tensors.map((t) => {
      const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
      const k = Math.min(perChunk ?? t.k, t.totalk);
      const n = chunks * k;
      const indices = t.totalk <= 256 ? new Uint8Array(n) : new Uint16Array(n);
      for (let i = 0; i < n; i++) indices[i] = i % k;
      const signs = new Float32Array(n);
      for (let i = 0; i < n; i++) signs[i] = (i * 7 + step + salt) % 3 === 0 ? -1 : 1;
      return { xshape: [...t.xshape], totalk: t.totalk, indices, values: packSigns(signs) };
    }),
  };
}

export interface ResultFrames {
  signed: Uint8Array;
  announce: Uint8Array;
  announceMessage: Announce;
  commitment: string;
}

/** SignedResult frame plus the Announce frame for it. */
export function resultFrames(id: Identity, result: TrainingResult): ResultFrames {
  const envelope = signResult(id.secretKey, result);
  const signed = encodeSignedResult({ envelope, result });
  const frame = encodeTrainingResult(result);
  const announce = signAnnounce(id.secretKey, {
    runId: result.runId,
    step: result.step,
    batch: result.batch,
    commitment: envelope.commitment,
    size: frame.length,
  });
  return {
    signed,
    announce: encodeAnnounce(announce),
    announceMessage: announce,
    commitment: bytesToHex(envelope.commitment),
  };
}

/**
 * An honest scripted client: in Warmup it sends its warmup witness; in each training round it sends its
 * result (SignedResult + Announce) when it has a batch, and, when it is a witness, a Witness whose
 * attestation claims the results the relay admitted for the previous round (the state names them; the round has ended, so
 * its record is final).
 */
export class HonestClient<P extends Participant = TestClient> {
  readonly c: P;
  private doneWarmup = -1;
  private doneResult = new Set<number>();
  private doneWitness = new Set<number>();
  private stopped = false;
  readonly log: string[] = [];

  constructor(c: P) {
    this.c = c;
  }

  stop(): void {
    this.stopped = true;
  }

  /** Lets a stopped client run again (it keeps what it already did for each round). */
  restart(): void {
    this.stopped = false;
  }

  async run(): Promise<void> {
    while (!this.stopped && !this.c.ended) {
      try {
        await this.step();
      } catch (e) {
        this.log.push((e as Error).message);
      }
      await sleep(50);
    }
  }

  private async step(): Promise<void> {
    const s = this.c.state;
    if (!s) return;
    const me = hexKey(this.c.id);
    const myIndex = s.epoch.clients.findIndex((cl) => cl.id === me && cl.state === 'Healthy');
    if (s.run_state === 'Warmup' && myIndex >= 0 && this.doneWarmup !== s.epoch.start_timestamp) {
      this.doneWarmup = s.epoch.start_timestamp;
      await this.c.warmupWitness(s.run_id, s.progress.epoch);
      return;
    }
    if (s.run_state !== 'RoundTrain') return;
    const round = currentRound(s);
    if (!round) return;
    const idx = rosterIndexOf(s, round, me);
    if (idx < 0) return;
    const assignments = roundAssignments(s, round);
    const mine = assignments.find((a) => a.id === me);
    if (mine && !this.doneResult.has(round.step)) {
      this.doneResult.add(round.step);
      const f = resultFrames(this.c.id, tinyResult(s.run_id, round.step, mine.batch));
      const refused = await this.c.submitResult(f);
      if (refused !== null) this.log.push(`result refused: ${refused}`);
    }
    if (isWitness(s, idx, round) && !this.doneWitness.has(round.step)) {
      // Round r's witnesses attest round r-1's results (core's acceptedCommitments): the attestation
      // claims the results the relay admitted for it, this client's own included.
      this.doneWitness.add(round.step);
      const prev = roundAtHeight(s, round.height - 1);
      const prevAssignments = prev ? roundAssignments(s, prev) : [];
      const admitted = prev ? roundAdmitted(prev) : [];
      const refused = await this.c.submitWitness({
        step: round.step,
        proof: roundSelection(round).witnessProof(idx),
        attested: attestationOf(prevAssignments.length, (slot) => (admitted[slot] ?? null) !== null),
        broadcastMerkle: new Uint8Array(32),
        metadata: { loss: 5 - round.step * 0.01, tokensPerSec: 1000, bandwidth: 1e6 },
      });
      if (refused !== null) this.log.push(`witness refused: ${refused}`);
    }
  }
}

export function dummyWitness(step: number) {
  return {
    step,
    proof: { position: 0, index: 0, witness: true },
    attested: new Uint8Array(0),
    broadcastMerkle: new Uint8Array(32),
  };
}
