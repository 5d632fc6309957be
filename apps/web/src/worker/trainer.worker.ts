// The training worker: probes the GPU (adapter limits → micro-batch), then runs @meshtrain/client in this
// worker — coordinator session over the relay's WebSocket (RelayLink), data and checkpoints over its HTTP
// API, the train step on onnxruntime-web's WebGPU EP and DisTrO's WGSL on the same GPUDevice, so parameters
// and gradients stay in GPU buffers. The page only sees the typed messages of protocol.ts. The tab's libp2p
// peer runs on the page (it needs RTCPeerConnection for WebRTC): the client here reaches it through the peer
// channel's PeerNetwork proxy (page-peer.ts), or through a circuit-only peer of its own when the page cannot.
//
// This file only routes messages; the state lives in one TabTrainer (tab-trainer.ts): its GPU (tab-gpu.ts),
// peer (tab-peer.ts), sessions (run-session.ts) and what it reports (status-reporter.ts, client-events.ts).
import type { PageToWorker, WorkerToPage } from './protocol.ts';
import { TabTrainer } from './tab-trainer.ts';

interface WorkerScope {
  postMessage(message: WorkerToPage): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<PageToWorker>) => void): void;
}
const scope = self as unknown as WorkerScope;

const trainer = new TabTrainer((m) => scope.postMessage(m));

function handle(m: PageToWorker): Promise<void> {
  switch (m.type) {
    case 'start':
      return trainer.start(m);
    case 'pause':
      return trainer.control({ paused: true });
    case 'resume':
      return trainer.control({ paused: false });
    case 'throttle':
      return trainer.control({ throttle: m.throttle });
    case 'visibility':
      return trainer.control({ visible: m.visible });
    case 'generate':
      return trainer.generate(m.prompt, m.maxTokens);
    case 'stop':
      return trainer.stop();
  }
}

scope.addEventListener('message', (e) => {
  handle(e.data).catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    scope.postMessage({ type: 'error', where: e.data.type, message });
    if (e.data.type !== 'generate') trainer.reporter.setPhase('error', `Something went wrong: ${message}`);
  });
});

setInterval(() => trainer.tick(), 1000);
