// What identities cost on an open relay: a permissionless run asks every Join for a proof of work (core's join
// puzzle, sized by the relay), a permissioned one does not (its grants are the cost), and one address can bring
// only so many identities into a run. Real server, real WebSockets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeJoin, originTag, signJoin, VERIFY_ONLY_DEVICE_PREFIX } from '@meshtrain/core';
import { startRelayServer, type RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, identity, TestClient } from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
const OPEN = 'open-run';
const CLOSED = 'closed-run';
const clients: TestClient[] = [];

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', joinPowBits: 10, maxIdentitiesPerAddress: 3 });
  relay.relay.createRun({ toml: fastRunToml(OPEN), mainAuthority: hexKey(identity(1)) });
  relay.relay.createRun({
    toml: fastRunToml(CLOSED),
    mainAuthority: hexKey(identity(1)),
    permissioned: true,
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await relay.close();
});

async function opened(run: string, n: number): Promise<TestClient> {
  const c = await TestClient.open(relay.url, run, identity(n));
  clients.push(c);
  await c.until(() => c.challenge !== undefined);
  return c;
}

describe('the cost of an identity', () => {
  it('a permissionless run asks for the relay-wide proof of work; a Join without it is refused', async () => {
    const c = await opened(OPEN, 10);
    expect(c.powBits).toBe(10);
    const lazy = signJoin(identity(10).secretKey, {
      runId: OPEN,
      p2pPeerId: '',
      deviceKind: 'cpu',
      challenge: c.challenge!,
    });
    expect(await c.request(encodeJoin(lazy))).toMatchObject({
      kind: 'error',
      message: { code: 'insufficient_work' },
    });
    // The same client solving it (TestClient.join solves what the challenge asks) is in.
    expect((await c.join('cpu', OPEN)).kind).toBe('ack');
  });

  it('a permissioned run asks for none', async () => {
    const c = await opened(CLOSED, 11);
    expect(c.powBits).toBe(0);
  });

  it('one address brings at most its share of identities into a run; those it brought may come back', async () => {
    // identity 10 joined above from this address; two more fit, the fourth does not.
    for (const n of [12, 13]) expect((await (await opened(OPEN, n)).join('cpu', OPEN)).kind).toBe('ack');
    const fourth = await opened(OPEN, 14);
    expect(await fourth.join('cpu', OPEN)).toMatchObject({
      kind: 'error',
      message: { code: 'too_many_identities' },
    });
    // A reconnect of one already counted is not a new identity.
    const again = await opened(OPEN, 12);
    expect((await again.join('cpu', OPEN)).kind).toBe('ack');
    expect(relay.relay.run(OPEN)!.state.members).toHaveLength(3);
  });
});

describe('origin tags', () => {
  it('a join carries the salted tag of its network, never the address (none over loopback); the store keeps the salt', async () => {
    const members = relay.relay.run(OPEN)!.state.members;
    // Every identity above joined over loopback: processes on the relay's own machine are not told apart.
    expect(members.length).toBeGreaterThan(1);
    for (const m of members) expect(m).not.toHaveProperty('origin');
    expect(originTag('127.0.0.1', relay.relay.originSalt)).toBeUndefined();
    expect(originTag('203.0.113.9', relay.relay.originSalt)).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(relay.relay.run(OPEN)!.state)).not.toContain('127.0.0');
    expect(relay.relay.store.originSalt()).toEqual(relay.relay.originSalt);
  });

  it('a Join whose device kind starts with the verify-only prefix makes a verify-only member', async () => {
    const c = await opened(CLOSED, 20);
    relay.relay.store.sessions.upsertGrant(
      CLOSED,
      hexKey(identity(20)),
      hexKey(identity(1)),
      true,
      Date.now(),
    );
    expect((await c.join(`${VERIFY_ONLY_DEVICE_PREFIX}node-trainer cpu`, CLOSED)).kind).toBe('ack');
    const m = relay.relay.run(CLOSED)!.state.members.find((x) => x.id === hexKey(identity(20)));
    expect(m?.verifier_only).toBe(true);
  });
});

describe('frame sizes after the join', () => {
  it("a joined client cannot send frames beyond its run's largest valid result", async () => {
    // Identity 12 is one this address already brought in (the test above).
    const c = await opened(OPEN, 12);
    expect((await c.join('cpu', OPEN)).kind).toBe('ack');
    const cap = relay.relay.run(OPEN)!.maxFrameBytes;
    expect(cap).toBeLessThan(relay.relay.limits.maxFrameBytes);
    expect(await c.request(new Uint8Array(cap + 1))).toMatchObject({
      kind: 'error',
      message: { code: 'wire_oversized' },
    });
  });
});
