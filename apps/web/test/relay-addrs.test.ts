import { describe, expect, it } from 'vitest';
import { pageRelayAddrs } from '../src/worker/relay-addrs.ts';

const ID = '12D3KooWNM1hZbYCqVsP7tzQjTfAHdwrKvMkJgzBTFa4JaXPEuZD';

describe('pageRelayAddrs', () => {
  it('puts the page origin first, with the relay PeerId, then the announced addresses', () => {
    const announced = [`/ip4/10.0.0.5/tcp/8787/ws/p2p/${ID}`];
    expect(pageRelayAddrs('http://127.0.0.1:8787', announced)).toEqual([
      `/ip4/127.0.0.1/tcp/8787/ws/p2p/${ID}`,
      ...announced,
    ]);
  });
  it('uses wss on 443 for an https origin behind a TLS proxy, and dns for host names', () => {
    const announced = [`/ip4/127.0.0.1/tcp/8787/ws/p2p/${ID}`];
    expect(pageRelayAddrs('https://train.example.org', announced)[0]).toBe(
      `/dns/train.example.org/tcp/443/tls/ws/p2p/${ID}`,
    );
    expect(pageRelayAddrs('http://[::1]:9000', announced)[0]).toBe(`/ip6/::1/tcp/9000/ws/p2p/${ID}`);
    expect(pageRelayAddrs('http://localhost:8787', announced)[0]).toBe(
      `/ip4/127.0.0.1/tcp/8787/ws/p2p/${ID}`,
    );
  });
  it('adds nothing when the relay announces no libp2p address, and dedupes', () => {
    expect(pageRelayAddrs('http://127.0.0.1:8787', [])).toEqual([]);
    const same = `/ip4/127.0.0.1/tcp/8787/ws/p2p/${ID}`;
    expect(pageRelayAddrs('http://127.0.0.1:8787', [same])).toEqual([same]);
    expect(pageRelayAddrs('not a url', [same])).toEqual([same]);
  });
});
