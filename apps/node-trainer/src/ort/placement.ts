// Which execution provider each node of a graph lands on, read from ORT's own verbose log ("Node placements",
// session_state.cc). ORT writes that log from native code straight to stderr, so the session is created in a
// child process (this file run as a script) and its output parsed here.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Device, createSession } from './session.ts';

export interface Placement {
  /** Nodes per execution provider, e.g. { WebGpuExecutionProvider: { count: 563, nodes: [] } }. */
  providers: Record<string, { count: number; nodes: string[] }>;
}

/**
 * Parses the block that follows "Node placements": either "All nodes placed on [EP]. Number of nodes: N" or,
 * per EP, "Node(s) placed on [EP]. Number of nodes: N" followed by one "  OpType (node name)" line per node.
 */
export function parsePlacements(log: string): Placement {
  const providers: Placement['providers'] = {};
  let current: { count: number; nodes: string[] } | null = null;
  let inBlock = false;
  for (const line of log.split('\n')) {
    if (line.includes('Node placements')) {
      inBlock = true;
      continue;
    }
    if (!inBlock) continue;
    const head = /(?:All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
    if (head?.[1]) {
      current = { count: Number(head[2]), nodes: [] };
      providers[head[1]] = current;
      continue;
    }
    const node = /VerifyEachNodeIsAssignedToAnEp\]\s{2,}(\S+ \(.*\))\s*$/.exec(line);
    if (node?.[1] && current) current.nodes.push(node[1]);
    else if (!line.includes('VerifyEachNodeIsAssignedToAnEp')) inBlock = false;
  }
  if (Object.keys(providers).length === 0) throw new Error('no "Node placements" block in the ORT log');
  return { providers };
}

/** Creates a verbose session for `onnx` in a child process (CPU fallback allowed, so every node is reported). */
export async function placementOf(onnx: Uint8Array, device: Device): Promise<Placement> {
  const dir = mkdtempSync(join(tmpdir(), 'meshtrain-placement-'));
  try {
    const file = join(dir, 'model.onnx');
    writeFileSync(file, onnx);
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), file, device], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    if (code !== 0) throw new Error(`placement probe exited with ${code}:\n${log.slice(-2000)}`);
    return parsePlacements(log);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, device] = process.argv.slice(2);
  if (!file || (device !== 'cpu' && device !== 'webgpu')) {
    console.error('usage: placement.ts MODEL.onnx cpu|webgpu');
    process.exit(2);
  }
  await createSession(readFileSync(file), {
    device,
    dtype: 'float32',
    verbose: true,
    allowCpuFallback: true,
  });
}
