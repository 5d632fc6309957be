// A network namespace for WebRTC tests. ICE needs a non-loopback host candidate (libjuice in node-datachannel
// gathers none on loopback, and Chromium none without a route), and tests may only send traffic to loopback or
// to namespaces they create. So a test creates one namespace with:
//   - lo, and a veth pair whose both ends stay inside it; one end holds NS_IP (10.213.0.1/24) and carries the
//     default route, so Chromium and libjuice gather NS_IP as their host candidate. Nothing leaves the namespace:
//     it has no other interface, and the veth's far end is in the same namespace;
//   - forwarded ports: a host port P on 127.0.0.1 (the relay, a static server) answers as 127.0.0.1:P inside the
//     namespace too, through a Unix socket (files cross namespaces, sockets bound to IPs do not). So pages in the
//     namespace keep a secure-context origin (http://127.0.0.1:P) and the relay stays on the host's loopback;
//   - a Chromium executable (a wrapper script) and `spawn` for processes that must run inside it.
// Peers inside then reach the relay through the forward and each other over NS_IP. Needs root (CAP_NET_ADMIN)
// and iproute2, as CI has; `namespacesAvailable()` says when not, and tests skip their WebRTC parts.
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_PATH } from './chromium.ts';

/** The namespace's one non-loopback address: every host ICE candidate inside it. */
export const NS_IP = '10.213.0.1';

const FORWARDER = fileURLToPath(new URL('./netns-forward.ts', import.meta.url));

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
}

let probed: { ok: boolean; reason: string } | undefined;

/** Whether this process may create namespaces (root + iproute2 on Linux); probed once by creating one. */
export function namespacesAvailable(): { ok: boolean; reason: string } {
  if (probed) return probed;
  if (process.platform !== 'linux') return (probed = { ok: false, reason: 'not Linux' });
  const name = `mt-probe-${randomBytes(3).toString('hex')}`;
  try {
    ip('netns', 'add', name);
    ip('netns', 'del', name);
    probed = { ok: true, reason: '' };
  } catch (err) {
    probed = {
      ok: false,
      reason: `ip netns unavailable (needs root/CAP_NET_ADMIN and iproute2): ${String(err)}`,
    };
  }
  return probed;
}

export interface TestNamespace {
  readonly name: string;
  /** NS_IP: the address peers inside gather as their host ICE candidate. */
  readonly ip: string;
  /** A Chromium executable that runs inside the namespace (for launchChromium's `executablePath`). */
  readonly chromiumPath: string;
  /** Makes the host's 127.0.0.1:`port` answer as 127.0.0.1:`port` inside the namespace. */
  forward(port: number): Promise<void>;
  /** Spawns `command args` inside the namespace (the returned process is the command itself). */
  spawn(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
  /** Stops the forwards and processes it started and deletes the namespace. */
  close(): Promise<void>;
}

const open = new Set<string>();
process.on('exit', () => {
  // Last resort when a test process dies between create and close.
  for (const name of open) {
    try {
      ip('netns', 'del', name);
    } catch {
      // already gone
    }
  }
});

export async function createTestNamespace(prefix = 'mt-e2e'): Promise<TestNamespace> {
  const id = randomBytes(3).toString('hex');
  const name = `${prefix}-${id}`;
  const vethA = `mtv${id}a`; // interface names are limited to 15 characters
  const vethB = `mtv${id}b`;
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-netns-'));
  ip('netns', 'add', name);
  open.add(name);
  try {
    ip('-n', name, 'link', 'set', 'lo', 'up');
    ip('-n', name, 'link', 'add', vethA, 'type', 'veth', 'peer', 'name', vethB);
    ip('-n', name, 'addr', 'add', `${NS_IP}/24`, 'dev', vethA);
    ip('-n', name, 'link', 'set', vethA, 'up');
    ip('-n', name, 'link', 'set', vethB, 'up');
    // Headless Chromium gathers no host candidate in a namespace without a default route.
    ip('-n', name, 'route', 'add', 'default', 'dev', vethA);
  } catch (err) {
    ip('netns', 'del', name);
    open.delete(name);
    throw err;
  }
  const chromiumPath = join(dir, 'chromium-in-netns.sh');
  await writeFile(chromiumPath, `#!/bin/sh\nexec ip netns exec ${name} ${CHROMIUM_PATH} "$@"\n`);
  await chmod(chromiumPath, 0o755);

  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const children: ChildProcess[] = [];

  const inside = (command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess => {
    const child = spawn('ip', ['netns', 'exec', name, command, ...args], { stdio: 'pipe', ...options });
    children.push(child);
    return child;
  };

  return {
    name,
    ip: NS_IP,
    chromiumPath,
    spawn: inside,
    async forward(port: number) {
      const path = join(dir, `port-${port}.sock`);
      // Host side: the Unix socket, spliced to the host's 127.0.0.1:port.
      const server = createServer((down) => {
        const up = connect(port, '127.0.0.1');
        for (const s of [down, up]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {
            down.destroy();
            up.destroy();
          });
        }
        down.pipe(up).pipe(down);
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path, () => resolve());
      });
      servers.push(server);
      // Namespace side: 127.0.0.1:port inside, spliced to the Unix socket.
      const child = inside(process.execPath, [FORWARDER, String(port), path]);
      await new Promise<void>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(
          () => reject(new Error(`port ${port}: forwarder not ready: ${out}`)),
          10_000,
        );
        child.stdout?.on('data', (b: Buffer) => {
          out += b.toString();
          if (out.includes('ready')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`port ${port}: forwarder exited with ${code}: ${out}`));
        });
      });
    },
    async close() {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null || c.signalCode !== null) return resolve();
              const kill = setTimeout(() => c.kill('SIGKILL'), 5000);
              c.once('exit', () => {
                clearTimeout(kill);
                resolve();
              });
              c.kill('SIGTERM');
            }),
        ),
      );
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      try {
        ip('netns', 'del', name); // also removes the veth pair
      } catch {
        // already gone
      }
      open.delete(name);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
