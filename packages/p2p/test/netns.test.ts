import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * WebRTC between two Node peers in two network namespaces joined by a veth pair. libjuice (node-datachannel)
 * gathers no loopback ICE candidates, so WebRTC cannot be tested on 127.0.0.1; and tests may only send
 * traffic to loopback or to namespaces they create. Layout (names unique per run, deleted in afterAll):
 *
 *   ns A: relay (10.210.0.1 ws + webrtc-direct), server peer  ── veth ──  ns B: fetcher peer (10.210.0.2)
 *
 * Each default route points at the other end of the veth, so the namespaces have a route (host candidates
 * are gathered) but nothing can leave them: they have no other interface.
 */

const FIXTURE = fileURLToPath(new URL('./fixtures/ns-node.ts', import.meta.url));
const RUN_ID = randomBytes(3).toString('hex');
const NS_A = `mt-p2p-a-${RUN_ID}`;
const NS_B = `mt-p2p-b-${RUN_ID}`;
const VETH_A = `mtpa${RUN_ID}`; // interface names are limited to 15 characters
const VETH_B = `mtpb${RUN_ID}`;
const IP_A = '10.210.0.1';
const IP_B = '10.210.0.2';
const BLOB_BYTES = 4 * 1024 * 1024;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
}

/** Namespaces need root (CAP_NET_ADMIN) and iproute2; probe once by creating and deleting one. */
function namespacesAvailable(): { ok: boolean; reason: string } {
  if (process.platform !== 'linux') return { ok: false, reason: 'not Linux' };
  const probe = `mt-p2p-probe-${RUN_ID}`;
  try {
    ip('netns', 'add', probe);
    ip('netns', 'del', probe);
    return { ok: true, reason: '' };
  } catch (err) {
    return {
      ok: false,
      reason: `ip netns unavailable (need root/CAP_NET_ADMIN and iproute2): ${String(err)}`,
    };
  }
}

const available = namespacesAvailable();
if (!available.ok) console.warn(`[p2p netns] skipping WebRTC namespace tests: ${available.reason}`);

const children: ChildProcess[] = [];
let namespacesCreated = false;

function deleteNamespaces(): void {
  for (const ns of [NS_A, NS_B]) {
    try {
      ip('netns', 'del', ns); // also destroys the veth end inside it
    } catch {
      // not created, or already gone
    }
  }
}

// Last resort if the worker dies between beforeAll and afterAll.
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  if (namespacesCreated) deleteNamespaces();
});

interface NodeEvent {
  event: string;
  [key: string]: unknown;
}

/** Starts a fixture node inside `ns` and resolves with its first event line (or rejects on error/timeout). */
function startNode(
  ns: string,
  role: string,
  args: Record<string, unknown>,
  timeoutMs = 20_000,
): Promise<NodeEvent> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, FIXTURE, role, JSON.stringify(args)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, PATH: `${process.execPath.replace(/\/node$/, '')}:${process.env.PATH ?? ''}` },
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  return new Promise<NodeEvent>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(
      () => reject(new Error(`${role} in ${ns}: no event in ${timeoutMs} ms; stderr: ${stderr}`)),
      timeoutMs,
    );
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let evt: NodeEvent;
        try {
          evt = JSON.parse(line) as NodeEvent;
        } catch {
          continue; // library log lines
        }
        clearTimeout(timer);
        if (evt.event === 'error')
          reject(new Error(`${role} in ${ns}: ${String(evt.name)}: ${String(evt.message)}`));
        else resolve(evt);
        return;
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${role} in ${ns} exited with ${code}; stderr: ${stderr}`));
    });
  });
}

async function stopChildren(): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const kill = setTimeout(() => c.kill('SIGKILL'), 3000);
          c.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
}

describe('WebRTC between network namespaces', () => {
  beforeAll(() => {
    if (!available.ok) return;
    namespacesCreated = true;
    ip('netns', 'add', NS_A);
    ip('netns', 'add', NS_B);
    // Created directly inside the namespaces: the veth never exists in the host's namespace.
    ip('link', 'add', VETH_A, 'netns', NS_A, 'type', 'veth', 'peer', 'name', VETH_B, 'netns', NS_B);
    ip('-n', NS_A, 'addr', 'add', `${IP_A}/24`, 'dev', VETH_A);
    ip('-n', NS_B, 'addr', 'add', `${IP_B}/24`, 'dev', VETH_B);
    for (const [ns, dev] of [
      [NS_A, VETH_A],
      [NS_B, VETH_B],
    ] as const) {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'set', dev, 'up');
    }
    ip('-n', NS_A, 'route', 'add', 'default', 'via', IP_B);
    ip('-n', NS_B, 'route', 'add', 'default', 'via', IP_A);
  });

  afterAll(async () => {
    await stopChildren();
    if (namespacesCreated) deleteNamespaces();
    namespacesCreated = false;
  });

  it.skipIf(!available.ok)(
    'dials /p2p-circuit/webrtc via the relay and fetches a blob over the direct WebRTC connection',
    async () => {
      const relay = await startNode(NS_A, 'relay', { host: IP_A });
      expect(relay.ws).toMatch(new RegExp(`^/ip4/${IP_A.replace(/\./g, '\\.')}/tcp/\\d+/ws/p2p/`));
      const server = await startNode(NS_A, 'server', { relay: relay.ws, blobBytes: BLOB_BYTES });
      expect(server.webrtc).toContain('/p2p-circuit/webrtc/p2p/');
      const fetched = await startNode(
        NS_B,
        'fetcher',
        {
          relay: relay.ws,
          peerId: server.peerId,
          address: server.address,
          relayWebrtcDirect: relay.webrtcDirect,
        },
        40_000,
      );
      console.log('[p2p netns]', JSON.stringify(fetched));
      expect(fetched.target).toBe(server.webrtc);
      expect(fetched.bytes).toBe(BLOB_BYTES);
      expect(fetched.verified).toBe(true);
      expect(fetched.peer).toBe(server.peerId);
      // The blob travelled over the direct WebRTC connection, not the relayed one.
      expect(fetched.limited).toBe(false);
      expect(String(fetched.remoteAddr)).toContain('/webrtc');
      const conns = fetched.connections as Array<{ limited: boolean; webrtc: boolean }>;
      expect(conns.some((c) => c.webrtc && !c.limited)).toBe(true);
      // A second, independent check: a Node dialer reaches the relay's /webrtc-direct listener.
      expect(String(fetched.relayDirect)).toMatch(/^ok: .*\/webrtc-direct\//);
    },
    60_000,
  );
});
