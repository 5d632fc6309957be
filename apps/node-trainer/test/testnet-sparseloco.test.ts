// local-testnet --inner-steps H: the run file trains SparseLoCo with H inner steps per round, and its schedule
// counts inner steps (docs/protocol.md "SparseLoCo rounds"); without the flag it is the DisTrO run it was.
import { describe, expect, it } from 'vitest';
import { coordinatorConfigOf, parseRunConfig, runLrSchedule } from '@meshtrain/core';
import { testnetToml } from '../src/testnet/index.ts';

const base = {
  numClients: 3,
  steps: 12,
  preset: 'micro' as const,
  randomKillNum: 0,
  randomKillInterval: 20,
  seed: 1,
};

describe('testnetToml', () => {
  it('with innerSteps: a SparseLoCo run whose schedule spans steps × H inner steps', () => {
    const run = parseRunConfig(testnetToml({ ...base, innerSteps: 4 })).config;
    const opt = run.model.LLM.optimizer;
    expect('SparseLoCo' in opt && opt.SparseLoCo.inner_steps).toBe(4);
    const lr = runLrSchedule(run);
    expect(lr.kind === 'Cosine' && lr.total_steps).toBe(48);
    expect(lr.warmup_steps).toBe(4);
    expect(coordinatorConfigOf(run).inner_steps).toBe(4);
  });

  it('without: DisTrO, one step per round', () => {
    const run = parseRunConfig(testnetToml(base)).config;
    expect('Distro' in run.model.LLM.optimizer).toBe(true);
    const lr = runLrSchedule(run);
    expect(lr.kind === 'Cosine' && lr.total_steps).toBe(12);
    expect(coordinatorConfigOf(run).inner_steps).toBeUndefined();
  });
});
