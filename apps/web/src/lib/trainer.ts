// The page's side of the training worker: starts it, forwards the volunteer's controls, and exposes what it
// reports as Svelte stores. Only typed messages cross (worker/protocol.ts).
import { writable } from 'svelte/store';
import { emptyStats } from '../worker/protocol.ts';
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

function send(m: PageToWorker): void {
  worker?.postMessage(m);
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
      trainerLog.update((l) => [...l.slice(-199), m.line]);
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
  send({ type: 'start', run, secretKeyHex, throttle, visible: document.visibilityState === 'visible' });
}

export function stopTrainer(): void {
  if (!worker) return;
  send({ type: 'stop' });
  worker.terminate();
  worker = null;
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
