// The relay's libp2p node (circuit-relay-v2 server for browser peers, plus packages/p2p's protocols).
//
// Shared-port mode (`publicPort` given; the production shape): libp2p listens on loopback behind the
// public HTTP port (see upgrade-dispatcher.ts) and announces the public address, so one port serves HTTP,
// the coordinator WebSockets and libp2p:
//   const server = createAdaptorServer({ fetch: app.fetch, websocket: { server: wss } });
//   server.listen(PORT, BIND_HOST)  … once listening:
//   const p2p = await startRelayP2P({ host: PUBLIC_HOST, publicPort: PORT, dataDir });
//   attachUpgradeDispatcher(server, { libp2pPort: p2p.internalPort });
//   … p2p.publicMultiaddrs → what clients dial (serve it in the run info) … await p2p.stop();
//
// Standalone mode (no `publicPort`): libp2p listens on `host`:`internalPort` itself (its own port, its
// own addresses announced), for setups that give libp2p a port of its own.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { createRelayNode, type RelayNode, type RelayNodeOptions } from '@meshtrain/p2p';

export interface RelayP2POptions {
  /**
   * Shared-port mode: the host peers dial (IPv4/IPv6 literal or DNS name). Standalone mode: the interface
   * libp2p binds (an IP literal). Default 127.0.0.1.
   */
  host?: string;
  /**
   * The port peers dial: Hono's public port (shared via the dispatcher), or a TLS proxy's in front of it.
   * Absent: standalone mode.
   */
  publicPort?: number;
  /** Announce `/tls/ws` (`wss`) because a TLS proxy terminates in front of the relay (default false). */
  secure?: boolean;
  /** libp2p's WebSockets port: on loopback in shared-port mode, on `host` in standalone mode (default: free). */
  internalPort?: number;
  /**
   * Also listen on `/udp/0/webrtc-direct` (default false). Standalone mode only: createRelayNode binds it
   * on the same host as WebSockets, which in shared-port mode is loopback (useless to remote peers, and
   * ICE gathers no loopback candidates). Shared-port WebRTC-direct needs a separate UDP host in
   * packages/p2p plus an announce list of [public ws, webrtc-direct with its runtime certhash].
   */
  webrtcDirect?: boolean;
  /**
   * File holding the node's 32-byte Ed25519 seed, created on first start (mode 0600). A stable PeerId
   * keeps the relay multiaddrs peers have stored valid across restarts. Without it the id is random.
   */
  keyFile?: string;
  /** The relay's data directory: `keyFile` defaults to `<dataDir>/libp2p.key`. */
  dataDir?: string;
  /** Anything else createRelayNode takes (identity seed, reservation limits, blob store, …). */
  node?: Omit<RelayNodeOptions, 'host' | 'port' | 'announce' | 'webrtcDirect'>;
}

export interface RelayP2P {
  node: RelayNode;
  peerId: string;
  /** Port libp2p upgrades are bridged to (`attachUpgradeDispatcher({ libp2pPort })`); 0 in standalone mode. */
  internalPort: number;
  /** What peers dial, with `/p2p/<relay id>`. */
  publicMultiaddrs: string[];
  stop(): Promise<void>;
}

function hostPrefix(host: string): string {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host)) return `/ip4/${host}`;
  if (host.includes(':')) return `/ip6/${host}`;
  return `/dns/${host}`;
}

/** A free loopback TCP port (libp2p hides the port it bound when `announce` is set, so we choose it). */
async function freeLoopbackPort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** The seed in `path`, or a new random one written there (atomically, owner-only). */
export async function loadOrCreateNodeKey(path: string): Promise<Uint8Array> {
  try {
    const seed = new Uint8Array(await readFile(path));
    if (seed.length !== 32) throw new Error(`${path}: expected 32 bytes, found ${seed.length}`);
    return seed;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const seed = new Uint8Array(randomBytes(32));
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, seed, { mode: 0o600 });
  await rename(tmp, path);
  return seed;
}

export async function startRelayP2P(options: RelayP2POptions = {}): Promise<RelayP2P> {
  const keyFile =
    options.keyFile ?? (options.dataDir === undefined ? undefined : join(options.dataDir, 'libp2p.key'));
  const privateKeySeed =
    keyFile === undefined ? options.node?.privateKeySeed : await loadOrCreateNodeKey(keyFile);
  const common = {
    ...options.node,
    ...(privateKeySeed === undefined ? {} : { privateKeySeed }),
    webrtcDirect: options.webrtcDirect ?? false,
  };
  const host = options.host ?? '127.0.0.1';

  if (options.publicPort === undefined) {
    const node = await createRelayNode({ ...common, host, port: options.internalPort ?? 0 });
    return {
      node,
      peerId: node.peerId,
      internalPort: 0,
      publicMultiaddrs: node.multiaddrs().map((ma) => ma.toString()),
      stop: async () => {
        await node.stop();
      },
    };
  }

  if (options.webrtcDirect === true)
    throw new RangeError(
      'webrtcDirect works only in standalone mode (no publicPort): shared-port mode binds libp2p on loopback',
    );
  if (!Number.isInteger(options.publicPort) || options.publicPort < 1 || options.publicPort > 65535)
    throw new RangeError(`publicPort must be a TCP port, got ${options.publicPort}`);
  const internalPort =
    options.internalPort !== undefined && options.internalPort !== 0
      ? options.internalPort
      : await freeLoopbackPort();
  const announce = `${hostPrefix(host)}/tcp/${options.publicPort}/${options.secure === true ? 'tls/ws' : 'ws'}`;
  const node = await createRelayNode({
    ...common,
    // libp2p's own HTTP server stays on loopback: only the dispatcher reaches it.
    host: '127.0.0.1',
    port: internalPort,
    announce: [announce],
  });
  const peerId = node.peerId;
  return {
    node,
    peerId,
    internalPort,
    publicMultiaddrs: [`${announce}/p2p/${peerId}`],
    stop: async () => {
      await node.stop();
    },
  };
}
