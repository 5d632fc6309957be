// The relay API's schemas name what is wrong with a reply, at its path, for the bad_response error.
import { describe, expect, it } from 'vitest';
import {
  CheckpointSummarySchema,
  DataManifestResponseSchema,
  mismatch,
  RunListSchema,
} from '../src/relay-api/schemas.ts';

const summary = {
  run_id: 'r',
  run_state: 'WaitingForMembers',
  run_state_index: 1,
  pending_pause: false,
  epoch: 0,
  step: 1,
  total_steps: 10,
  round: null,
  members: 0,
  epoch_clients: 0,
  healthy_clients: 0,
  connected: 0,
  permissioned: false,
  main_authority: 'a',
  join_authority: 'b',
  created_at: 0,
  seq: 0,
  param_hash: null,
  trusted_verifiers: [],
  trust_warning: null,
};

describe('relay API schemas', () => {
  it('accepts a reply that fits and names the first misfit by its path', () => {
    expect(mismatch(RunListSchema, { runs: [summary], p2p_multiaddrs: [] })).toBeNull();
    expect(mismatch(RunListSchema, 'hello')).toBe('reply is not an object');
    expect(mismatch(RunListSchema, { runs: [{ ...summary, step: -1 }], p2p_multiaddrs: [] })).toMatch(
      /^reply\.runs\[0\]\.step: /,
    );
    expect(mismatch(RunListSchema, { runs: [], p2p_multiaddrs: [1] })).toBe(
      'reply.p2p_multiaddrs[0] is not a string',
    );
  });

  it('refuses a data order or checkpoint source it does not know rather than guess', () => {
    expect(mismatch(DataManifestResponseSchema, { order: 'shuffled' })).not.toBeNull();
    const ck = {
      step: 3,
      epoch: 1,
      paramHash: 'ab',
      files: { 'config.json': '/c' },
      sha256: {},
      bytes: {},
      source: 'init',
      createdAt: 'now',
    };
    expect(mismatch(CheckpointSummarySchema, ck)).toBeNull();
    expect(mismatch(CheckpointSummarySchema, { ...ck, source: 'elsewhere' })).toMatch(/^reply\.source: /);
    expect(mismatch(CheckpointSummarySchema, { ...ck, files: { x: 1 } })).toBe(
      'reply.files.x is not a string',
    );
  });
});
