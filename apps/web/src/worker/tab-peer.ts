// This tab's libp2p peer, as the training worker holds it: on the page when the page offered to host it (its
// end of the peer channel, used once: WebRTC to other peers), else in this worker (circuit-only). Started on
// the first join and kept across pauses; null when the relay runs no libp2p or it cannot be reached.
import { PagePeerNetwork } from './page-peer.ts';
import { workerTabNetwork } from './tab-network.ts';
import type { TabNetwork } from './tab-network.ts';

export class TabPeer {
  /** The peer once started (null before, or when there is none). */
  current: TabNetwork | null = null;
  private starting: Promise<TabNetwork | null> | null = null;
  private readonly log: (line: string) => void;
  /** The relay's libp2p addresses (`p2p_multiaddrs` of GET /api/runs/:id). */
  private announced: readonly string[] = [];
  private pagePort: MessagePort | null = null;

  constructor(log: (line: string) => void) {
    this.log = log;
  }

  /** What `start` needs: the relay's addresses and the page's offer (null: the page hosts no peer). */
  configure(announced: readonly string[], pagePort: MessagePort | null): void {
    this.announced = announced;
    this.pagePort = pagePort;
  }

  /** The peer, started on the first call; later calls get the same one. */
  async get(relayUrl: string, secretKey: Uint8Array): Promise<TabNetwork | null> {
    this.starting ??= this.start(relayUrl, secretKey);
    this.current = await this.starting;
    return this.current;
  }

  async stop(): Promise<void> {
    await this.current?.stop().catch(() => {});
    this.current = null;
    this.starting = null;
  }

  private async start(relayUrl: string, secretKey: Uint8Array): Promise<TabNetwork | null> {
    if (this.announced.length === 0) {
      this.log('p2p: the relay runs without libp2p; results and checkpoints come from the relay');
      return null;
    }
    if (this.pagePort) {
      const port = this.pagePort;
      this.pagePort = null;
      const opened = await PagePeerNetwork.open(port, this.announced, this.log);
      if (opened.ok) return opened.network;
      if (!opened.fallback) {
        this.log(`p2p: not available (${opened.reason}); results and checkpoints come from the relay`);
        return null;
      }
      this.log(
        `p2p: the page cannot host this tab's peer (${opened.reason}); the worker starts a circuit-only one`,
      );
    }
    const { startTabNetwork } = await import('./peer-network.ts');
    const net = await startTabNetwork({ relayUrl, announced: this.announced, secretKey, log: this.log });
    return net ? workerTabNetwork(net) : null;
  }
}
