// JSON shapes crossing page.evaluate between packages/p2p/test/browser-peer.test.ts and page.ts.

export interface StartArgs {
  relayAddrs: string[];
  /** 32-byte identity seed as hex (the PeerId is derived from it). */
  seedHex: string;
}

export interface StartResult {
  peerId: string;
  circuitAddress: string;
  relayPeerIds: string[];
  multiaddrs: string[];
  hasWebRTC: boolean;
}

/** A typed P2PError (or any error) as data: the test asserts on `name` and `code`. */
export interface PageError {
  name: string;
  code: string | null;
  message: string;
  /** FetchFailedError / CheckpointDownloadError: the per-candidate failures' names. */
  causes: string[];
}

export type Outcome<T> = { ok: true; value: T; ms: number } | { ok: false; error: PageError; ms: number };

export interface FetchedBlobResult {
  b64: string;
  limited: boolean;
  remoteAddr: string;
}

export interface DownloadedResult {
  b64: string;
  contentHashHex: string;
  pieceCount: number;
  piecesByPeer: Record<string, number>;
}

/** page.ts ↔ worker.ts: one scenario call and its answer. */
export interface WorkerRequest {
  id: number;
  name: string;
  args: unknown;
}

export type WorkerReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };
