// Reads the WebGPU adapter's limits and picks how many sequences one train-step call may hold on it. The
// largest single buffers of a Llama train step are the logits (rows × seq × vocab floats, plus their
// gradient) and the attention scores (rows × heads × seq × seq); each must fit in one storage binding.
import { PRESETS } from '@meshtrain/model';
import type { AdapterSummary, DeviceProbe, RunTarget } from './protocol.ts';

/** Keep every buffer at most this share of the binding limit: ORT allocates intermediates we don't model. */
const HEADROOM = 0.5;

export function chooseMicroBatch(
  run: Pick<RunTarget, 'preset' | 'seqLen' | 'microBatchSize'>,
  maxBinding: number,
): { microBatch: number; reason: string } {
  const shape =
    run.preset !== null && run.preset in PRESETS ? PRESETS[run.preset as keyof typeof PRESETS] : null;
  const want = Math.max(1, run.microBatchSize);
  if (!shape)
    return { microBatch: 1, reason: `unknown model preset "${run.preset ?? ''}": one sequence at a time` };
  const perRow = Math.max(
    run.seqLen * shape.vocab_size * 4,
    shape.num_attention_heads * run.seqLen * run.seqLen * 4,
    run.seqLen * shape.intermediate_size * 4,
  );
  const fit = Math.max(1, Math.floor((maxBinding * HEADROOM) / perRow));
  if (fit >= want)
    return { microBatch: want, reason: `the run's micro_batch_size (${want}) fits this GPU's buffer limits` };
  return {
    microBatch: fit,
    reason: `${fit} sequence(s) per pass: the largest activation (${perRow} bytes per sequence) must stay within half of maxStorageBufferBindingSize (${maxBinding} bytes)`,
  };
}

export type ProbeOutcome =
  | { ok: true; probe: DeviceProbe; adapter: GPUAdapter }
  | { ok: false; reason: 'no-api' | 'no-adapter'; message: string };

export async function probeDevice(run: RunTarget): Promise<ProbeOutcome> {
  const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
  if (gpu === undefined)
    return {
      ok: false,
      reason: 'no-api',
      message: 'WebGPU is not available in this worker (navigator.gpu is missing)',
    };
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (adapter === null)
    return {
      ok: false,
      reason: 'no-adapter',
      message: 'the browser offers no WebGPU adapter (GPU blocklisted or disabled)',
    };
  const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  const summary: AdapterSummary = {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    isFallbackAdapter: info.isFallbackAdapter ?? false,
  };
  const l = adapter.limits;
  const { microBatch, reason } = chooseMicroBatch(run, l.maxStorageBufferBindingSize);
  return {
    ok: true,
    adapter,
    probe: {
      adapter: summary,
      limits: {
        maxBufferSize: l.maxBufferSize,
        maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
        maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
        maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
        maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
      },
      features: [...adapter.features].sort(),
      microBatch,
      microBatchReason: reason,
    },
  };
}
