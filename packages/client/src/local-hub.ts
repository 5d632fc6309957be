// An in-process coordinator service: core's real state machine behind CoordinatorLink objects, for tests and
// single-process simulations. It does what PROTOCOL.md asks of the relay (joins, result storage and
// forwarding, witness/health-check/leave events, parameter hashes, a checkpoint store) without sockets.
// Time is virtual: `advance(seconds)` ticks the coordinator, so tests run at CPU speed, not wall-clock.
import {
  bytesToHex,
  coordinatorConfigOf,
  createCoordinator,
  decodeSignedResult,
  encodeTrainingResult,
  publicKeyOf,
  roundAssignments,
  tick,
  verifySignedResult,
  type Announce,
  type CoordinatorEvent,
  type CoordinatorState,
  type HealthCheck,
  type RunConfig,
  type WitnessMessage,
} from '@meshtrain/core';
import type { Checkpoint, CheckpointSource, CoordinatorLink } from './interfaces.ts';

export interface HubLog {
  /** Coordinator errors for events clients sent (refused witnesses, health checks...). */
  refusals: { id: string; event: string; code: string; message: string }[];
  /** Per epoch-end step: client id → parameter hash (hex). */
  paramHashes: Map<number, Map<string, string>>;
  /** RoundEnded effects: whether each round reached witness quorum. */
  rounds: { step: number; witnesses: number; quorum: number; reached: boolean }[];
}

interface LinkState {
  id: string;
  connected: boolean;
  stateListeners: ((s: CoordinatorState) => void)[];
  announceListeners: ((a: Announce) => void)[];
  resultListeners: ((frame: Uint8Array) => void)[];
  /** Test fault: this client never receives results (neither forwarded nor fetchable). */
  starved: boolean;
}

export class LocalHub {
  state: CoordinatorState;
  now: number;
  readonly log: HubLog = { refusals: [], paramHashes: new Map(), rounds: [] };
  private readonly links = new Map<string, LinkState>();
  private readonly frames = new Map<string, Uint8Array>();
  private readonly checkpointStore = new Map<number, Checkpoint>();

  readonly run: RunConfig;
  readonly runId: string;

  constructor(run: RunConfig, runId: string, runSeedHex = '00'.repeat(32)) {
    this.run = run;
    this.runId = runId;
    this.now = 1_000;
    this.state = createCoordinator({
      run_id: runId,
      run_seed: runSeedHex,
      config: coordinatorConfigOf(run),
      now: this.now,
    });
  }

  private apply(id: string, event: CoordinatorEvent): Error | null {
    const r = tick(this.state, event, this.now);
    for (const e of r.effects)
      if (e.type === 'RoundEnded')
        this.log.rounds.push({
          step: e.step,
          witnesses: e.witnesses,
          quorum: e.quorum,
          reached: e.quorum_reached,
        });
    if (r.error) {
      this.log.refusals.push({ id, event: event.type, code: r.error.code, message: r.error.message });
      return r.error;
    }
    if (r.state !== this.state) {
      this.state = r.state;
      // Deliver asynchronously, as a socket would, so a client is never re-entered from its own send.
      const s = this.state;
      queueMicrotask(() => {
        for (const l of this.links.values()) if (l.connected) for (const f of l.stateListeners) f(s);
      });
    }
    return null;
  }

  /** Advance virtual time one second at a time, ticking the coordinator each second. */
  advance(seconds = 1): void {
    for (let i = 0; i < seconds; i++) {
      this.now += 1;
      this.apply('', { type: 'tick' });
    }
  }

  /** A coordinator session for the holder of `secretKey`; it joins immediately. */
  connect(secretKey: Uint8Array): CoordinatorLink {
    const id = bytesToHex(publicKeyOf(secretKey));
    const l: LinkState = {
      id,
      connected: true,
      stateListeners: [],
      announceListeners: [],
      resultListeners: [],
      starved: false,
    };
    this.links.set(id, l);
    this.apply(id, { type: 'join', id, p2p_id: `local-${id.slice(0, 8)}` });
    const refuse = (err: Error | null) => {
      if (err) throw err;
    };
    return {
      clientId: id,
      onState: (f) => {
        l.stateListeners.push(f);
        const s = this.state;
        queueMicrotask(() => f(s));
      },
      onAnnounce: (f) => l.announceListeners.push(f),
      onResult: (f) => l.resultListeners.push(f),
      submitResult: async (frame, announce) => {
        const signed = decodeSignedResult(frame);
        const commitment = verifySignedResult(signed.envelope, signed.result);
        // What the relay checks: the sender is the assignee of that batch in that round.
        const from = bytesToHex(signed.envelope.from);
        const ok = this.state.epoch.rounds.some(
          (r) =>
            r.step === signed.result.step &&
            roundAssignments(this.state, r).some(
              (a) =>
                a.id === from &&
                a.batch.start === signed.result.batch.start &&
                a.batch.end === signed.result.batch.end,
            ),
        );
        if (!ok) throw new Error('not the assignee of that batch');
        // The relay's checks: the announce names this result (commitment, step, batch, TrainingResult size).
        if (
          bytesToHex(announce.commitment) !== bytesToHex(commitment) ||
          announce.step !== signed.result.step ||
          announce.batch.start !== signed.result.batch.start ||
          announce.batch.end !== signed.result.batch.end ||
          announce.size !== encodeTrainingResult(signed.result).length
        )
          throw new Error('the announce does not match the result');
        this.frames.set(bytesToHex(commitment), frame);
        for (const other of this.links.values()) {
          if (other.id === from || !other.connected) continue;
          for (const f of other.announceListeners) queueMicrotask(() => f(announce));
          if (!other.starved) for (const f of other.resultListeners) queueMicrotask(() => f(frame));
        }
      },
      submitWitness: async (w: WitnessMessage) => {
        if (this.state.run_state === 'Warmup') return refuse(this.apply(id, { type: 'warmup_witness', id }));
        refuse(
          this.apply(id, {
            type: 'witness',
            id,
            step: w.step,
            proof: w.proof,
            participant_bloom: w.participantBloom,
            broadcast_bloom: w.broadcastBloom,
            broadcast_merkle: bytesToHex(w.broadcastMerkle),
          }),
        );
      },
      submitHealthCheck: async (h: HealthCheck) => {
        const checks = h.reports.map((r) => ({
          id: this.state.epoch.clients[r.clientIndex]?.id ?? '',
          proof: r.committeeProof,
        }));
        refuse(this.apply(id, { type: 'health_check', id, checks }));
      },
      reportParamHash: async (_epoch, step, hash) => {
        const m = this.log.paramHashes.get(step) ?? new Map<string, string>();
        m.set(id, bytesToHex(hash));
        this.log.paramHashes.set(step, m);
      },
      fetchResult: async (commitment) =>
        l.starved ? null : (this.frames.get(bytesToHex(commitment)) ?? null),
      rejoin: async () => {
        this.apply(id, { type: 'leave', id });
        this.apply(id, { type: 'join', id, p2p_id: `local-${id.slice(0, 8)}` });
      },
    };
  }

  /** Simulates a crash: the client leaves and stops receiving states. */
  disconnect(id: string): void {
    const l = this.links.get(id);
    if (!l) return;
    l.connected = false;
    this.apply(id, { type: 'leave', id });
  }

  /** Test fault: hand one frame to one client only (e.g. an equivocating trainer's second result). */
  deliverTo(id: string, frame: Uint8Array): void {
    const l = this.links.get(id);
    if (l) for (const f of l.resultListeners) f(frame);
  }

  /** Test fault: result payloads stop reaching this client (announces still arrive). */
  starve(id: string, starved = true): void {
    const l = this.links.get(id);
    if (l) l.starved = starved;
  }

  /** A checkpoint store with the relay's rule: an upload is kept only if its hash is the reported majority. */
  checkpoints(): CheckpointSource {
    return {
      load: async (step) => {
        const ck = this.checkpointStore.get(step);
        if (!ck) return null;
        return { ...ck, params: new Map([...ck.params].map(([k, v]) => [k, Float32Array.from(v)])) };
      },
      upload: async (ck) => {
        const reported = this.log.paramHashes.get(ck.step);
        const hex = bytesToHex(ck.paramHash);
        const votes = [...(reported?.values() ?? [])].filter((h) => h === hex).length;
        if (votes * 2 <= (reported?.size ?? 0))
          throw new Error('hash is not the majority of reported hashes');
        this.checkpointStore.set(ck.step, {
          ...ck,
          params: new Map([...ck.params].map(([k, v]) => [k, Float32Array.from(v)])),
        });
      },
    };
  }
}
