// The training worker's state, in one object: the volunteer's controls, the run and this tab's GPU once
// prepared, the tab's peer, the current session, and what the page is told. `start` prepares (probe the GPU,
// read the run from the relay, open the device); `settle` then joins or leaves as the controls say.
import { fetchRunConfig } from '@meshtrain/client';
import { bytesToHex, hexToBytes, publicKeyOf } from '@meshtrain/core';
import type { RunConfig } from '@meshtrain/core';
import { ByteTokenizer, modelConfigForRun, parameterCount } from '@meshtrain/model';
import type { LlamaConfig } from '@meshtrain/model';
import { probeDevice } from './device-probe.ts';
import type { PageToWorker, RunTarget, Throttle, WorkerToPage } from './protocol.ts';
import { openRunSession } from './run-session.ts';
import type { RunSession } from './run-session.ts';
import { StatusReporter } from './status-reporter.ts';
import { adapterNameOf, openTabGpu } from './tab-gpu.ts';
import type { TabGpu } from './tab-gpu.ts';
import { TabPeer } from './tab-peer.ts';

/** The run and this tab's means to train it, ready once `start` succeeded. */
interface Prepared {
  run: RunTarget;
  config: RunConfig;
  model: LlamaConfig;
  secretKey: Uint8Array;
  gpu: TabGpu;
}

/** What the volunteer asked for. */
interface Controls {
  throttle: Throttle;
  visible: boolean;
  paused: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class TabTrainer {
  readonly reporter: StatusReporter;
  private readonly post: (m: WorkerToPage) => void;
  private readonly peer: TabPeer;
  private controls: Controls = {
    throttle: { share: 1, onlyWhenVisible: false },
    visible: true,
    paused: false,
  };
  private prepared: Prepared | null = null;
  private session: RunSession | null = null;
  private joining: Promise<void> | null = null;
  /** The last train step's time: the throttle rests in proportion to it. */
  private lastStepMs = 0;

  constructor(post: (m: WorkerToPage) => void) {
    this.post = post;
    this.reporter = new StatusReporter(post, () => ({
      session: this.session,
      mesh: this.peer.current,
      gpu: this.prepared?.gpu ?? null,
    }));
    this.peer = new TabPeer((line) => this.reporter.log(line));
  }

  async start(m: Extract<PageToWorker, { type: 'start' }>): Promise<void> {
    const { reporter } = this;
    this.controls = { ...this.controls, throttle: m.throttle, visible: m.visible };
    const secretKey = hexToBytes(m.secretKeyHex, 32);
    const clientId = bytesToHex(publicKeyOf(secretKey));
    reporter.status.clientId = clientId;
    reporter.setPhase('probing', 'Checking your GPU…');
    const outcome = await probeDevice(m.run);
    if (!outcome.ok) {
      reporter.setPhase('no-webgpu', `This browser cannot train: ${outcome.message}.`);
      return;
    }
    const { probe } = outcome;
    this.post({ type: 'probe', probe });
    reporter.log(`GPU: ${adapterNameOf(probe)}; micro-batch ${probe.microBatch} (${probe.microBatchReason})`);
    const { detail, config } = await fetchRunConfig(m.run.relayUrl, m.run.runId);
    this.peer.configure(detail.p2p_multiaddrs, m.peerPort);
    const model = modelConfigForRun(config);
    const seqLen = config.model.LLM.max_seq_len;
    const gpu = await openTabGpu(outcome.adapter, probe, config, model, {
      onError: (message) => this.post({ type: 'error', where: 'webgpu', message }),
      onLost: (message) => {
        this.leave();
        reporter.setPhase('error', `The GPU device was lost (${message}). Reload the page to start again.`);
      },
      gate: () => this.gate(),
      onStep: (ms, rows) => {
        this.lastStepMs = ms;
        reporter.recordStep(rows * seqLen, ms);
      },
    });
    this.prepared = { run: m.run, config, model, secretKey, gpu };
    reporter.log(
      `model: ${parameterCount(model).toLocaleString('en-US')} parameters, ${config.meshtrain.preset ?? 'custom'} preset`,
    );
    await reporter.restore(m.run.runId, clientId);
    await this.settle();
  }

  /** Applies a control change (pause, resume, throttle, visibility), then joins or leaves accordingly. */
  control(change: Partial<Controls>): Promise<void> {
    this.controls = { ...this.controls, ...change };
    return this.settle();
  }

  async generate(prompt: string, maxTokens: number): Promise<void> {
    const p = this.prepared;
    if (!p || !this.session)
      throw new Error('start contributing first: the model lives in the training worker');
    const params = await this.session.client.parameters();
    if (params.size === 0)
      throw new Error('this tab has not loaded the model yet (it does so at the next warmup)');
    const tok = new ByteTokenizer();
    const window = Math.min(p.config.model.LLM.max_seq_len, 64);
    const ids = await p.gpu.backend.generate(params, [...tok.encode(prompt)], maxTokens, window, 32);
    this.post({ type: 'generated', prompt, text: tok.decode(ids) });
  }

  async stop(): Promise<void> {
    this.leave();
    await this.prepared?.gpu.dispose();
    this.prepared = null;
    await this.peer.stop();
    this.reporter.setPhase('stopped', 'Stopped.');
  }

  /** The page's periodic refresh while a session runs (byte counters move without client events). */
  tick(): void {
    if (this.session) this.reporter.publish();
  }

  /** Joins when allowed, leaves when paused or hidden-and-visible-only. */
  private async settle(): Promise<void> {
    if (!this.prepared) return;
    const { paused, throttle, visible } = this.controls;
    if (paused) {
      this.leave();
      this.reporter.setPhase('paused', 'Paused: this tab left the run and does no work until you resume.');
    } else if (throttle.onlyWhenVisible && !visible) {
      this.leave();
      this.reporter.setPhase('throttled', 'Waiting: you asked to contribute only while this tab is visible.');
    } else if (!this.session && !this.joining) {
      this.joining = this.join().finally(() => (this.joining = null));
      await this.joining;
    } else this.reporter.publish();
  }

  private async join(): Promise<void> {
    const p = this.prepared;
    if (!p || this.session) return;
    const net = await this.peer.get(p.run.relayUrl, p.secretKey);
    this.session = await openRunSession(
      {
        ...p,
        backend: p.gpu.backend,
        distro: p.gpu.distro,
        adapterName: p.gpu.adapterName,
        net,
        reporter: this.reporter,
        post: this.post,
      },
      (ended) => {
        if (this.session === ended) this.session = null;
      },
    );
  }

  private leave(): void {
    if (!this.session) return;
    this.reporter.carryOver();
    this.session.close();
    this.session = null;
  }

  /** The throttle: rest in proportion to the last step's time so training takes `share` of wall time. */
  private async gate(): Promise<void> {
    const { share } = this.controls.throttle;
    if (share < 1 && this.lastStepMs > 0) await sleep(this.lastStepMs * (1 / share - 1));
  }
}
