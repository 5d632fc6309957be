// The page's side of the training worker: starts it, forwards the volunteer's controls, and exposes what it
// reports as Svelte stores. Only typed messages cross (worker/protocol.ts). It also hosts the tab's libp2p
// peer for the worker (peer-host.ts), because only the page's main thread has RTCPeerConnection.
import { writable } from 'svelte/store';
import { hexToBytes } from '@meshtrain/core';
import { emptyStats } from '../worker/protocol.ts';
import { hostPeerNetwork } from './peer-host.ts';
import type { PeerHost } from './peer-host.ts';
import type {
  DeviceProbe,
  PageToWorker,
  RunTarget,
  Throttle,
  TrainerStatus,
  WorkerToPage,
} from '../worker/protocol.ts';

export interface TrainerErrorEntry {
  where: string;
  message: string;
  at: number;
}

export const trainerStatus = writable<TrainerStatus>({
  phase: 'idle',
  message: 'Not started.',
  clientId: null,
  stats: emptyStats(),
});
export const deviceProbe = writable<DeviceProbe | null>(null);
export const trainerLog = writable<string[]>([]);
export const trainerErrors = writable<TrainerErrorEntry[]>([]);
export const generated = writable<{ prompt: string; text: string } | null>(null);

let worker: Worker | null = null;
let peerHost: PeerHost | null = null;

function send(m: PageToWorker, transfer: Transferable[] = []): void {
  worker?.postMessage(m, transfer);
}

function addLog(line: string): void {
  trainerLog.update((l) => [...l.slice(-199), line]);
}

function onMessage(m: WorkerToPage): void {
  switch (m.type) {
    case 'status':
      trainerStatus.set(m.status);
      break;
    case 'probe':
      deviceProbe.set(m.probe);
      break;
    case 'log':
      addLog(m.line);
      break;
    case 'generated':
      generated.set({ prompt: m.prompt, text: m.text });
      break;
    case 'error':
      trainerErrors.update((l) => [...l.slice(-19), { where: m.where, message: m.message, at: Date.now() }]);
      break;
  }
}

export function trainerRunning(): boolean {
  return worker !== null;
}

export function startTrainer(run: RunTarget, secretKeyHex: string, throttle: Throttle): void {
  stopTrainer();
  const w = new Worker(new URL('../worker/trainer.worker.ts', import.meta.url), {
    type: 'module',
    name: 'meshtrain-trainer',
  });
  w.addEventListener('message', (e: MessageEvent<WorkerToPage>) => onMessage(e.data));
  w.addEventListener('error', (e) => {
    e.preventDefault();
    onMessage({ type: 'error', where: 'worker', message: e.message || 'the training worker failed to load' });
    trainerStatus.update((s) => ({
      ...s,
      phase: 'error',
      message: `The training worker stopped: ${e.message}`,
    }));
  });
  worker = w;
  // The peer channel: the page runs the tab's libp2p peer unless `?p2p=worker` asks for the worker's
  // circuit-only one (how the fallback path is exercised and compared).
  let peerPort: MessagePort | null = null;
  if (new URLSearchParams(location.search).get('p2p') !== 'worker') {
    const channel = new MessageChannel();
    peerHost = hostPeerNetwork(channel.port1, {
      relayUrl: run.relayUrl,
      secretKey: hexToBytes(secretKeyHex, 32),
      log: addLog,
    });
    peerPort = channel.port2;
  }
  send(
    { type: 'start', run, secretKeyHex, throttle, visible: document.visibilityState === 'visible', peerPort },
    peerPort ? [peerPort] : [],
  );
}

export function stopTrainer(): void {
  if (!worker) return;
  send({ type: 'stop' });
  worker.terminate();
  worker = null;
  void peerHost?.stop();
  peerHost = null;
  trainerStatus.update((s) => ({ ...s, phase: 'stopped', message: 'Stopped.' }));
}

export const pauseTrainer = () => send({ type: 'pause' });
export const resumeTrainer = () => send({ type: 'resume' });
export const setThrottle = (throttle: Throttle) => send({ type: 'throttle', throttle });
export const generate = (prompt: string, maxTokens: number) => send({ type: 'generate', prompt, maxTokens });

if (typeof document !== 'undefined')
  document.addEventListener('visibilitychange', () =>
    send({ type: 'visibility', visible: document.visibilityState === 'visible' }),
  );
