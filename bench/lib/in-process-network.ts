// A network in one process: core's real coordinator behind a LocalHub on virtual time (virtual-time.ts), and
// real Clients that join it whenever the caller adds them, each with its own training backend, DisTrO backend
// and data, optionally wrapped into an attack simulation (@meshtrain/client/testing's adversary). What
// bench:quality's network run and bench:integrity's runs share.
import {
  Client,
  type CheckpointSource,
  type ClientEvent,
  type CoordinatorLink,
  type DataSource,
  type TrainingBackend,
} from '@meshtrain/client';
import { LocalHub, type LocalHubOptions } from '@meshtrain/client/testing';
import { identityFromSeed, type RunConfig } from '@meshtrain/core';
import type { DistroBackend } from '@meshtrain/distro';
import { initParameters, modelConfigForRun } from '@meshtrain/model';
import { quiesce, VirtualClock } from './virtual-time.ts';

export interface NetPeer {
  /** Coordinator id (public key, hex). */
  id: string;
  client: Client;
  events: ClientEvent[];
  done: Promise<void>;
}

/** What a client is made of; an adversary replaces some of them. */
export interface PeerParts {
  link: CoordinatorLink;
  data: DataSource;
  checkpoints: CheckpointSource;
}

export interface PeerSpec {
  /** Seed of the peer's Ed25519 identity (32 bytes). */
  identitySeed: Uint8Array;
  backend: TrainingBackend;
  distro: DistroBackend;
  data: DataSource;
  /** Parameter shapes (the shell knows the model: OrtTrainingBackend.shapes). */
  shapes: ReadonlyMap<string, readonly number[]>;
  /** Turns the honest parts into what this peer really uses (an attack simulation, a recorder). */
  wrap?: (parts: PeerParts, secretKey: Uint8Array) => PeerParts;
  /** Where the client's events go (default: a new array). */
  events?: ClientEvent[];
}

export class InProcessNetwork {
  readonly hub: LocalHub;
  readonly clock: VirtualClock;
  readonly peers: NetPeer[] = [];
  private readonly run: RunConfig;
  private readonly busy: () => Promise<void> | null;

  /** `busy`: resolves once the compute running outside the event loop (ONNX sessions, GPU work) is done. */
  constructor(
    run: RunConfig,
    runId: string,
    busy: () => Promise<void> | null,
    hubOptions: LocalHubOptions = {},
  ) {
    this.run = run;
    this.busy = busy;
    this.hub = new LocalHub(run, runId, hubOptions);
    this.clock = new VirtualClock(this.hub);
  }

  /** A new client that joins at once (a member for the coordinator's next epoch) and runs until stopped. */
  addPeer(spec: PeerSpec): NetPeer {
    const identity = identityFromSeed(spec.identitySeed);
    const honest: PeerParts = {
      link: this.hub.connect(identity.secretKey),
      data: spec.data,
      checkpoints: this.hub.checkpoints(),
    };
    const parts = spec.wrap ? spec.wrap(honest, identity.secretKey) : honest;
    const model = modelConfigForRun(this.run);
    const events: ClientEvent[] = spec.events ?? [];
    const client = new Client({
      run: this.run,
      runId: this.hub.runId,
      secretKey: identity.secretKey,
      link: parts.link,
      backend: spec.backend,
      distro: spec.distro,
      data: parts.data,
      initParams: () => initParameters(model, this.run.meshtrain.seed),
      checkpoints: parts.checkpoints,
      onEvent: (e) => events.push(e),
      now: this.clock.now,
      sleep: this.clock.sleep,
    });
    client.setShapes(spec.shapes);
    const peer: NetPeer = { id: parts.link.clientId, client, events, done: client.run() };
    this.peers.push(peer);
    return peer;
  }

  /** Resolves once every client is idle: no compute pending and nothing left for the event loop to run. */
  quiesce(): Promise<void> {
    return quiesce(this.busy);
  }

  /** One step of virtual time once everything is idle. */
  async step(): Promise<void> {
    await this.quiesce();
    this.clock.advance();
  }

  /** A few steps of time, so that the clients see the final state and stop by themselves. */
  async settle(steps = 10): Promise<void> {
    for (let i = 0; i < steps; i++) await this.step();
  }

  /** Stops every client and waits for them. */
  async stop(): Promise<void> {
    for (const p of this.peers) p.client.stop();
    await Promise.all(this.peers.map((p) => p.done));
  }
}
