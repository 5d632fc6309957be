// The worker's coordinator link counts the results it downloads from the relay's HTTP result route (the
// volunteer page's "from the relay" bytes), against a real HTTP server answering that route.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { CountingRelayLink } from '../src/worker/counting-link.ts';

const known = new Uint8Array(32).fill(5);
const frame = Uint8Array.from({ length: 777 }, (_, i) => i % 251);
let url = '';
const server = createServer((req, res) => {
  if (req.url === `/api/runs/r1/results/${bytesToHex(known)}`) {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(frame);
  } else {
    res.writeHead(404);
    res.end();
  }
});

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('CountingRelayLink', () => {
  it('counts the results and bytes fetched from the relay, not the misses', async () => {
    const link = new CountingRelayLink({
      relayUrl: url,
      runId: 'r1',
      secretKey: new Uint8Array(32).fill(1),
      deviceKind: 'test',
    });
    expect(await link.fetchResult(new Uint8Array(32).fill(6))).toBeNull();
    expect([link.results, link.resultBytes]).toEqual([0, 0]);
    const got = await link.fetchResult(known);
    expect(got).toEqual(frame);
    await link.fetchResult(known);
    expect([link.results, link.resultBytes]).toEqual([2, 2 * frame.length]);
  });
});
