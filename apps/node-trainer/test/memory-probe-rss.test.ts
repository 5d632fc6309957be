// measureFootprint on a real train step, in a file of its own: the process resident set it reads is the whole
// process's, so memory another test allocates (and the collector frees at any moment) would move the probes'
// peaks and flatten the line. node-trainer measures in a fresh process the same way.
import { describe, expect, it } from 'vitest';
import { PRESETS } from '@meshtrain/model';
import { type Footprint, estimateFootprint, memoryShape } from '../src/backend/device.ts';
import { measureFootprint, ortProbeStep, processRssMeter } from '../src/backend/memory-probe.ts';

describe('measuring a real train step', () => {
  it('on the CPU EP: a footprint growing with its rows', async () => {
    const meter = processRssMeter();
    if (!meter) return expect(process.platform).not.toBe('linux');
    const config = PRESETS.tiny;
    const f = await measureFootprint(meter, ortProbeStep({ config, seqLen: 128, device: 'cpu' }), 8);
    expect(f).not.toBeNull();
    // Activations of 8 more rows of 128 tokens: more than the logits alone, less than the doubled estimate.
    const perRow = (f as Footprint).perRowBytes;
    expect(perRow).toBeGreaterThan(128 * config.vocab_size * 4);
    expect(perRow).toBeLessThan(estimateFootprint(memoryShape(config, 128)).perRowBytes * 4);
  }, 120_000);
});
