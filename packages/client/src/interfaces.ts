// The I/O a client needs, as interfaces. packages/client is isomorphic (browser Web Worker and Node): shells
// implement these with WebSockets, fetch, libp2p and an ONNX runtime; tests implement them in-process.
import type { Announce, CoordinatorState, HealthCheck, Verdict, WitnessMessage } from '@meshtrain/core';
import type { DistroBackend, DistroTensor } from '@meshtrain/distro';

export type ParameterMap = Map<string, Float32Array>;

export interface TrainStepOutput {
  /** Mean cross-entropy over the batch's predicted tokens. */
  loss: number;
  /** One gradient per parameter, keyed by Hugging Face name. */
  grads: ParameterMap;
}

/** Runs the model's train-step graph. Parameters live wherever the backend keeps them between calls. */
export interface TrainingBackend {
  /** Device in words, e.g. "onnxruntime-node cpu" or "webgpu (NVIDIA ...)". */
  readonly description: string;
  /** Largest number of sequences one `trainStep` call accepts; the client splits bigger batches. */
  readonly maxRows: number;
  /** Parameters used by the following train steps (the client passes the lookahead copy). */
  loadParams(params: ParameterMap): Promise<void>;
  /** `tokens`: `rows × (seqLen + 1)` ids, int32. */
  trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput>;
  /**
   * Loss only (held-out evaluation), optional. With `params` it evaluates those without replacing what
   * `loadParams` loaded, so an evaluation can never change the parameters a concurrent train step uses.
   */
  evalLoss?(tokens: Int32Array, rows: number, params?: ParameterMap): Promise<number>;
  dispose?(): Promise<void>;
}

/** Gradients of one train step as tensors of the DisTrO backend; they stay valid until `release()`. */
export interface ResidentStepOutput {
  loss: number;
  grads: Map<string, DistroTensor>;
  release(): void;
}

/**
 * A backend whose device is the DisTrO backend's (a browser tab: onnxruntime-web and DisTrO's WGSL on one
 * GPUDevice). The client then feeds it the lookahead parameters as DisTrO tensors and gets the gradients back
 * as DisTrO tensors: per step, nothing the size of the model crosses to the host, only the compressed result.
 */
export interface ResidentTrainingBackend extends TrainingBackend {
  /** The DisTrO backend whose tensors this backend reads and returns (the client must use this one). */
  readonly residentDistro: DistroBackend;
  /** Parameters for the following resident train steps; read in place, so keep them until the step ends. */
  loadParamTensors(params: ReadonlyMap<string, DistroTensor>): Promise<void>;
  trainStepResident(tokens: Int32Array, rows: number): Promise<ResidentStepOutput>;
}

export function isResidentFor(b: TrainingBackend, distro: DistroBackend): b is ResidentTrainingBackend {
  return (b as Partial<ResidentTrainingBackend>).residentDistro === distro;
}

/** Samples of the run's dataset by global sample index. */
export interface DataSource {
  /** Samples `start..end` inclusive as `(end − start + 1) × (seqLen + 1)` int32 ids. */
  samples(start: number, end: number): Promise<Int32Array>;
}

/** The coordinator session (PROTOCOL.md: WebSocket to the relay). */
export interface CoordinatorLink {
  /** This client's Ed25519 public key, lowercase hex: its coordinator id. */
  readonly clientId: string;
  /**
   * Every coordinator state, in order: the relay's StateSnapshot, then one state per StateDelta frame (the
   * link replays the deltas; listeners get whole states either way).
   */
  onState(listener: (state: CoordinatorState) => void): void;
  /**
   * Announcements of stored results, where the host sends them (the in-process hub does; the relay does not:
   * its state names every admitted commitment, which clients fetch by).
   */
  onAnnounce(listener: (announce: Announce) => void): void;
  /** SignedResult frames the relay forwards (the guaranteed delivery path); optional. */
  onResult?(listener: (signedResultFrame: Uint8Array) => void): void;
  /**
   * A SignedResult frame (core's encoding) and the trainer's Announce for it. The host stores the frame and
   * records the result in the coordinator, whose state then names its commitment to every peer; the relay
   * link sends the frame alone (the announce is for peers and for hosts that forward announces).
   */
  submitResult(signedResultFrame: Uint8Array, announce: Announce): Promise<void>;
  /** A round witness submission (its attestation of the previous round's results). */
  submitWitness(witness: WitnessMessage): Promise<void>;
  /** "My model for `epoch` is loaded": the WarmupWitness frame. */
  submitWarmupWitness(epoch: number): Promise<void>;
  submitHealthCheck(check: HealthCheck): Promise<void>;
  /** A verifier's report on a sampled result of the round before the open one (the Verdict frame). */
  submitVerdict(verdict: Verdict): Promise<void>;
  /** ParamHash frame: SHA-256 over all parameters at an epoch end. */
  reportParamHash(epoch: number, step: number, hash: Uint8Array): Promise<void>;
  /** The stored SignedResult frame for a commitment (relay HTTP), or null if the relay lacks it. */
  fetchResult(commitment: Uint8Array): Promise<Uint8Array | null>;
  /** Leave the run (Withdrawn) and register again for the next epoch: how a client re-syncs. */
  rejoin(reason: string): Promise<void>;
}

/**
 * Peer-to-peer fast path. Everything here may fail; the relay is the guaranteed path. Results travel as
 * TrainingResult frames content-addressed by their commitment, which the coordinator state's admitted results name.
 */
export interface PeerNetwork {
  /** Offer this client's result to peers (they fetch it by `announce.commitment`). */
  publish(announce: Announce, signedResultFrame: Uint8Array): Promise<void>;
  /**
   * The TrainingResult frame with this commitment from peers (`hintClientIds`: coordinator ids likely to
   * hold it, e.g. its trainer), or null. The caller checks the frame against the commitment.
   */
  fetch(commitment: Uint8Array, hintClientIds: readonly string[]): Promise<Uint8Array | null>;
  onAnnounce?(listener: (announce: Announce) => void): void;
  /** Serve the current parameters to joiners (P2P checkpoint sharing). */
  shareCheckpoint?(checkpoint: Checkpoint): Promise<void>;
  /** Serve `bytes` to peers under their SHA-256 (a closed round's AdmittedList frame). */
  shareBlob?(bytes: Uint8Array): Promise<void>;
  /**
   * The bytes whose SHA-256 is `address` from a few of the run's peers picked at random (the fetch checks
   * the hash), or null when none of them has it.
   */
  fetchBlob?(address: Uint8Array): Promise<Uint8Array | null>;
}

/** What a relay link's replica needs of the peers to share admitted lists (PeerNetwork's blob methods). */
export type BlobPeers = Required<Pick<PeerNetwork, 'shareBlob' | 'fetchBlob'>>;

export interface Checkpoint {
  /** `progress.step` the parameters belong to (the step the next epoch starts at). */
  step: number;
  epoch: number;
  /** parameterHash(params). */
  paramHash: Uint8Array;
  params: ParameterMap;
  /** Where the bytes came from, for logs. */
  via?: 'peers' | 'relay' | 'local';
  /**
   * Set by the relay when the parameters of this step were lost with the last clients of an epoch: this is
   * the newest earlier checkpoint, which every joiner of the step gets alike.
   */
  rolledBackFrom?: number;
}

/** Where a (re)joining client gets the model: peers first, then the relay's store. */
export interface CheckpointSource {
  /** The newest checkpoint for `step`, or null if none exists yet. Callers verify the hash. */
  load(step: number): Promise<Checkpoint | null>;
  /** Offer this client's end-of-epoch checkpoint (the relay keeps it if the hash matches the agreed one). */
  upload?(checkpoint: Checkpoint): Promise<void>;
  /** Whether a checkpoint for exactly `step` is stored (cheap: no parameters are downloaded). */
  has?(step: number): Promise<boolean>;
}
