import { DEFAULT_RUN_TOML, parseRunConfig, type RunConfig } from '@meshtrain/core';
import { describe, expect, it } from 'vitest';
import { modelConfigForRun, parameterSizes, PRESETS, RunModelError, parameterCount } from '../src/index.ts';

const base = parseRunConfig(DEFAULT_RUN_TOML).config;
const withMeshtrain = (m: Partial<RunConfig['meshtrain']>): RunConfig =>
  ({ ...base, meshtrain: { ...base.meshtrain, ...m } }) as RunConfig;

describe('modelConfigForRun', () => {
  it("is the preset with the run's overrides applied", () => {
    expect(modelConfigForRun(withMeshtrain({ preset: 'micro' }))).toEqual(PRESETS.micro);
    const wider = modelConfigForRun(withMeshtrain({ preset: 'micro', model: { num_hidden_layers: 3 } }));
    expect(wider).toEqual({ ...PRESETS.micro, num_hidden_layers: 3 });
  });
  it('refuses a run without a preset whose overrides are not a full shape, naming what is missing', () => {
    const run = withMeshtrain({ preset: undefined, model: { hidden_size: 64 } });
    expect(() => modelConfigForRun(run)).toThrow(RunModelError);
    expect(() => modelConfigForRun(run)).toThrow(/lacks vocab_size, intermediate_size/);
  });
  it('refuses an invalid shape', () => {
    const run = withMeshtrain({ preset: 'micro', model: { num_key_value_heads: 3 } });
    expect(() => modelConfigForRun(run)).toThrow(/model config:/);
  });
});

describe('parameterSizes', () => {
  it('counts every parameter once, in total parameterCount', () => {
    const sizes = parameterSizes(PRESETS.micro);
    expect(sizes.get('model.embed_tokens.weight')).toBe(PRESETS.micro.vocab_size * PRESETS.micro.hidden_size);
    expect([...sizes.values()].reduce((a, b) => a + b, 0)).toBe(parameterCount(PRESETS.micro));
  });
});
