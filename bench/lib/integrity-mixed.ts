// bench:integrity's mixed part: honest clients on two kinds of device verify each other for a whole run (of
// the micro preset by default). CPU clients are node-trainer's assembly (onnxruntime-node's CPU EP, DisTrO's
// CPU reference); WebGPU clients train on onnxruntime-node's WebGPU EP and run DisTrO's WGSL kernels on a Dawn
// device — the GPU path for both the gradient a fingerprint and a verifier read and the coefficients a verifier
// compares. Without a GPU both are SwiftShader (VK_ICD_FILENAMES), which is slow: size the run with that in mind.
import type { DataSource } from '@meshtrain/client';
import { createCpuBackend, createWebGpuBackend } from '@meshtrain/distro';
import { dawnDevice } from '@meshtrain/distro/node';
import { modelConfigForRun, parameterCount } from '@meshtrain/model';
import { localDataSource } from '../../apps/node-trainer/src/net/local-data.ts';
import { anyBusy, PendingWork, tracked } from './busy.ts';
import { InProcessNetwork } from './in-process-network.ts';
import {
  join,
  maxVirtualSeconds,
  outcome,
  type IntegrityContext,
  type NetworkOutcome,
} from './integrity-detection.ts';
import { mixedRun } from './integrity-config.ts';
import type { Device, Member } from './integrity-verdicts.ts';
import { SharedOrt } from './shared-ort.ts';

export interface MixedRun extends NetworkOutcome {
  adapter: string;
  parameters: number;
  /** Seconds inside ONNX Runtime per device, and DisTrO's WGSL calls' seconds per operation. */
  seconds: {
    ort_cpu: number;
    ort_webgpu: number;
    distro_webgpu: Record<string, { seconds: number; calls: number }>;
  };
}

export async function runMixed(ctx: IntegrityContext): Promise<MixedRun> {
  const f = ctx.flags;
  const run = mixedRun(f);
  const model = modelConfigForRun(run);
  const opt = run.model.LLM.optimizer;
  if (!('Distro' in opt)) throw new Error('bench:integrity runs DisTrO runs');
  const chunk = opt.Distro.compression_chunk;
  const dawn = await dawnDevice();
  if (!dawn)
    throw new Error('no WebGPU adapter for the mixed run (is VK_ICD_FILENAMES set to a Vulkan driver?)');
  const data: DataSource = await localDataSource(ctx.dataDir, f.mixedSeqLen);
  const micro = run.meshtrain.micro_batch_size;
  const cpuOrt = new SharedOrt(model, f.mixedSeqLen, micro, { intraOpThreads: f.threads, spinning: false });
  const gpuOrt = new SharedOrt(model, f.mixedSeqLen, micro, {}, 'webgpu');
  const gpuWork = new PendingWork();
  const started = performance.now();
  const net = new InProcessNetwork(
    run,
    'integrity-mixed',
    anyBusy(
      () => cpuOrt.busy(),
      () => gpuOrt.busy(),
      gpuWork.busy,
    ),
  );
  const { hub, clock } = net;
  const t0 = clock.seconds;
  const members: Member[] = [];
  const total = f.mixedCpu + f.mixedWebgpu;
  // Devices alternate while both are left.
  const devices: Device[] = [];
  for (let c = f.mixedCpu, w = f.mixedWebgpu; c + w > 0;) {
    const cpu = c > 0 && (devices.length % 2 === 0 || w === 0);
    devices.push(cpu ? 'cpu' : 'webgpu');
    if (cpu) c--;
    else w--;
  }
  for (let i = 0; i < total; i++) {
    const webgpu = devices[i] === 'webgpu';
    const ort = webgpu ? gpuOrt : cpuOrt;
    const spec = {
      identitySeed: new Uint8Array(32).fill(0x40 + i),
      backend: ort.forPeer(),
      distro: webgpu
        ? tracked(createWebGpuBackend(dawn.device, { chunk, description: dawn.description }), gpuWork)
        : createCpuBackend({ chunk }),
      data,
      shapes: ort.backend.shapes,
    };
    members.push(join(net, spec, 'honest', webgpu ? 'webgpu' : 'cpu'));
  }
  ctx.log(
    `mixed: ${f.mixedPreset} (${parameterCount(model).toLocaleString('en-US')} params), ${f.mixedCpu} CPU + ${f.mixedWebgpu} WebGPU ` +
      `clients (${dawn.description}), ${f.mixedBatch}×${f.mixedSeqLen} tokens per step, ${f.mixedSteps} steps, ` +
      `${f.mixedPercent}% of results verified`,
  );
  const progress = ctx.progress('mixed', f.mixedSteps);
  const maxSeconds = maxVirtualSeconds(run, f.mixedSteps);
  try {
    while (hub.state.run_state !== 'Finished') {
      await net.quiesce();
      const verified = members.reduce(
        (n, m) => n + m.peer.events.filter((e) => e.type === 'verified').length,
        0,
      );
      const failed = members.reduce(
        (n, m) => n + m.peer.events.filter((e) => e.type === 'verified' && !e.pass).length,
        0,
      );
      progress.update(
        hub.state.progress.step,
        `${verified} verdicts, ${failed} failed, ${hub.state.ejected.length} ejected`,
      );
      if (clock.seconds - t0 > maxSeconds)
        throw new Error(`the mixed run did not finish in ${maxSeconds} virtual seconds`);
      clock.advance();
    }
    await net.settle();
  } finally {
    await net.stop();
  }
  progress.finish();
  const out = await outcome(net, members, started, t0, cpuOrt.seconds + gpuOrt.seconds);
  await cpuOrt.dispose();
  await gpuOrt.dispose();
  return {
    ...out,
    adapter: dawn.description,
    parameters: parameterCount(model),
    seconds: {
      ort_cpu: cpuOrt.seconds,
      ort_webgpu: gpuOrt.seconds,
      distro_webgpu: Object.fromEntries(gpuWork.seconds),
    },
  };
}
