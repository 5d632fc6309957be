// `--replica full|light` on `train` (how the relay link follows the coordinator) and on `local-testnet` (passed
// to the honest trainers it starts). The light path itself is tested against a real relay in
// apps/relay/test/light-sessions.test.ts.
import { describe, expect, it } from 'vitest';
import { CliError } from '../src/command.ts';
import { plan } from '../src/testnet/launch.ts';
import { parseTrainOptions } from '../src/train/options.ts';

const base = ['--relay', 'http://127.0.0.1:1', '--run-id', 'r'];

describe('--replica', () => {
  it('train follows the summary by default, the full log with full, and refuses anything else', () => {
    expect(parseTrainOptions(base).replica).toBe('light');
    expect(parseTrainOptions([...base, '--replica', 'light']).replica).toBe('light');
    expect(parseTrainOptions([...base, '--replica', 'full']).replica).toBe('full');
    expect(() => parseTrainOptions([...base, '--replica', 'half'])).toThrow(CliError);
    expect(() => parseTrainOptions([...base, '--replica', 'half'])).toThrow(/--replica: full or light/);
  });

  it('local-testnet hands it to its honest trainers only', () => {
    const light = plan({
      numClients: 2,
      lateJoiners: 1,
      adversaries: [{ kind: 'sign-flip', count: 1 }],
      replica: 'light',
    });
    for (const p of light) expect(p.args.includes('light')).toBe(p.role === 'honest');
    expect(light.filter((p) => p.role === 'honest')).toHaveLength(3);
    for (const p of plan({ numClients: 2, lateJoiners: 0, adversaries: [] }))
      expect(p.args).toEqual(['--replica', 'light']);
    for (const p of plan({ numClients: 2, lateJoiners: 0, adversaries: [], replica: 'full' }))
      expect(p.args).toEqual(['--replica', 'full']);
  });
});
