// DirectLinks' scheduling (who dials, when it retries, what it gives up on) over a scripted host: the dials
// themselves are real WebRTC in browser-webrtc.test.ts; here the clock and the dial outcomes are the test's.
import { multiaddr } from '@multiformats/multiaddr';
import type { Connection } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import { afterEach, describe, expect, it } from 'vitest';
import { DirectLinks } from '../src/index.ts';
import type { DirectLinkEvent, DirectLinkHost, PeerLink } from '../src/index.ts';

const RELAY = '/ip4/127.0.0.1/tcp/9/ws/p2p/12D3KooWNM1hZbYCqVsP7tzQjTfAHdwrKvMkJgzBTFa4JaXPEuZD';

/** A host whose dials succeed or fail as the test says, and whose links are what the dials made. */
class ScriptedHost implements DirectLinkHost {
  readonly links = new Map<string, PeerLink>();
  readonly dials: string[] = [];
  /** Peers whose dials fail (e.g. they have no WebRTC). */
  readonly refusing = new Set<string>();
  private readonly pending: (() => void)[] = [];
  hold = false;

  readonly peerId: string;
  readonly webrtc: boolean;

  constructor(peerId: string, webrtc = true) {
    this.peerId = peerId;
    this.webrtc = webrtc;
  }

  linkTo(peerId: string): PeerLink | undefined {
    return this.links.get(peerId);
  }

  viaRelays(peerId: string, options: { webrtc?: boolean } = {}): Multiaddr[] {
    return [multiaddr(`${RELAY}/p2p-circuit${options.webrtc === false ? '' : '/webrtc'}`)].map((m) =>
      m.encapsulate(`/p2p/${peerId}`),
    );
  }

  async dial(target: Multiaddr): Promise<Connection> {
    const peer = target.toString().split('/p2p/').pop() as string;
    this.dials.push(peer);
    if (this.hold) await new Promise<void>((r) => this.pending.push(r));
    if (this.refusing.has(peer)) throw new Error('protocol selection failed');
    this.links.set(peer, 'webrtc');
    return {} as Connection;
  }

  release(): void {
    for (const r of this.pending.splice(0)) r();
  }
}

const flush = () => new Promise((r) => setTimeout(r, 0));
let links: DirectLinks | undefined;
afterEach(() => links?.stop());

function setup(self: string, webrtc = true) {
  let now = 1_000_000;
  const host = new ScriptedHost(self, webrtc);
  const events: DirectLinkEvent[] = [];
  links = new DirectLinks(host, { now: () => now, intervalMs: 3_600_000, yieldMs: 5_000, backoffMs: 30_000 });
  links.onEvent((e) => events.push(e));
  return { host, links, events, advance: (ms: number) => (now += ms) };
}

// PeerIds compare as strings: 'peerA' < 'peerB' < 'peerC'.
describe('DirectLinks', () => {
  it('the smaller PeerId dials at once; the larger waits for it, then dials itself', async () => {
    const small = setup('peerA');
    small.links.want(['peerB']);
    await flush();
    expect(small.host.dials).toEqual(['peerB']);
    expect(small.events).toMatchObject([{ type: 'linked', peer: 'peerB' }]);

    const large = setup('peerC');
    large.links.want(['peerB']);
    await flush();
    expect(large.host.dials).toEqual([]);
    large.advance(4_999);
    large.links.tick();
    await flush();
    expect(large.host.dials).toEqual([]);
    large.advance(1);
    large.links.tick();
    await flush();
    expect(large.host.dials).toEqual(['peerB']);
  });

  it('does not dial a peer it already reaches directly, nor itself, nor without WebRTC', async () => {
    const s = setup('peerA');
    s.host.links.set('peerB', 'webrtc');
    s.host.links.set('peerC', 'direct');
    s.links.want(['peerA', 'peerB', 'peerC']);
    await flush();
    expect(s.host.dials).toEqual([]);
    expect(s.links.wanted()).toEqual(['peerB', 'peerC']);

    const none = setup('peerA', false);
    none.links.want(['peerB']);
    await flush();
    expect(none.host.dials).toEqual([]);
    expect(none.links.wanted()).toEqual([]);
  });

  it('backs off a peer that cannot take WebRTC, doubling the delay, and forgets peers no longer wanted', async () => {
    const s = setup('peerA');
    s.host.refusing.add('peerB');
    s.links.want(['peerB']);
    await flush();
    expect(s.events).toMatchObject([{ type: 'failed', peer: 'peerB', failures: 1, retryInMs: 30_000 }]);
    s.advance(29_999);
    s.links.tick();
    await flush();
    expect(s.host.dials).toHaveLength(1);
    s.advance(1);
    s.links.tick();
    await flush();
    expect(s.host.dials).toHaveLength(2);
    expect(s.events[1]).toMatchObject({ type: 'failed', failures: 2, retryInMs: 60_000 });
    expect(s.links.stats).toEqual({ dials: 2, linked: 0, failed: 2 });

    s.links.want([]);
    s.advance(120_000);
    s.links.tick();
    await flush();
    expect(s.host.dials).toHaveLength(2);
  });

  it('keeps at most maxDials dials in flight and maxPeers peers', async () => {
    const now = 0;
    const host = new ScriptedHost('peer0');
    host.hold = true;
    links = new DirectLinks(host, { now: () => now, intervalMs: 3_600_000, maxDials: 2, maxPeers: 3 });
    links.want(['peer1', 'peer2', 'peer3', 'peer4']);
    await flush();
    expect(links.wanted()).toEqual(['peer1', 'peer2', 'peer3']);
    expect(host.dials).toEqual(['peer1', 'peer2']);
    links.tick();
    expect(host.dials).toEqual(['peer1', 'peer2']);
    host.release();
    await flush();
    await flush();
    links.tick();
    await flush();
    expect(host.dials).toEqual(['peer1', 'peer2', 'peer3']);
    host.release();
  });
});
