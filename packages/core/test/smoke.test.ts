import { describe, expect, it } from 'vitest';
import { CORE } from '../src/index.ts';

describe('workspace', () => {
  it('resolves core', () => {
    expect(CORE).toBe('core');
  });
});
