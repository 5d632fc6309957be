// The training worker. Today it probes the GPU (adapter limits → micro-batch size) and keeps the volunteer's
// controls (pause, throttle, visibility) in one place; the coordinator session and the train step
// (packages/client on onnxruntime-web's WebGPU EP) plug in behind the same messages.
import { bytesToHex, hexToBytes, publicKeyOf } from '@meshtrain/core';
import { probeDevice } from './device-probe.ts';
import { emptyStats } from './protocol.ts';
import type {
  PageToWorker,
  RunTarget,
  Throttle,
  TrainerPhase,
  TrainerStatus,
  WorkerToPage,
} from './protocol.ts';

interface WorkerScope {
  postMessage(message: WorkerToPage): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<PageToWorker>) => void): void;
}
const scope = self as unknown as WorkerScope;

const NOT_WIRED =
  'Training in the tab is not switched on in this build yet: the GPU was probed and this tab follows the run. ' +
  'Your browser will start training as soon as the in-tab trainer ships.';

const status: TrainerStatus = { phase: 'idle', message: 'Not started.', clientId: null, stats: emptyStats() };
let run: RunTarget | null = null;
let throttle: Throttle = { share: 1, onlyWhenVisible: false };
let visible = true;
let userPaused = false;
let deviceReady = false;

function post(m: WorkerToPage): void {
  scope.postMessage(m);
}

function setPhase(phase: TrainerPhase, message: string): void {
  status.phase = phase;
  status.message = message;
  post({ type: 'status', status: structuredClone(status) });
}

/** The phase the controls imply once the device is ready. */
function settle(): void {
  if (!deviceReady) return;
  if (userPaused) setPhase('paused', 'Paused: this tab does no work until you resume.');
  else if (throttle.onlyWhenVisible && !visible)
    setPhase('throttled', 'Waiting: you asked to contribute only while this tab is visible.');
  else setPhase('ready', NOT_WIRED);
}

async function start(m: Extract<PageToWorker, { type: 'start' }>): Promise<void> {
  run = m.run;
  throttle = m.throttle;
  visible = m.visible;
  status.clientId = bytesToHex(publicKeyOf(hexToBytes(m.secretKeyHex, 32)));
  setPhase('probing', 'Checking your GPU…');
  const outcome = await probeDevice(run);
  if (!outcome.ok) {
    setPhase('no-webgpu', `This browser cannot train: ${outcome.message}.`);
    return;
  }
  post({ type: 'probe', probe: outcome.probe });
  post({
    type: 'log',
    line: `GPU: ${outcome.probe.adapter.description || outcome.probe.adapter.vendor || 'unnamed adapter'}; micro-batch ${outcome.probe.microBatch} (${outcome.probe.microBatchReason})`,
  });
  deviceReady = true;
  settle();
}

function handle(m: PageToWorker): Promise<void> | void {
  switch (m.type) {
    case 'start':
      return start(m);
    case 'pause':
      userPaused = true;
      return settle();
    case 'resume':
      userPaused = false;
      return settle();
    case 'throttle':
      throttle = m.throttle;
      return settle();
    case 'visibility':
      visible = m.visible;
      return settle();
    case 'generate':
      post({
        type: 'error',
        where: 'generate',
        message:
          'this tab holds no model parameters yet: "try the model" works once the tab has trained or loaded a checkpoint',
      });
      return;
    case 'stop':
      deviceReady = false;
      setPhase('stopped', 'Stopped.');
      return;
  }
}

scope.addEventListener('message', (e) => {
  Promise.resolve()
    .then(() => handle(e.data))
    .catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      post({ type: 'error', where: e.data.type, message });
      setPhase('error', `Something went wrong: ${message}`);
    });
});
