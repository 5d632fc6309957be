// End to end on real processes: `local-testnet --adversary sybil:N` (one process, N colluding identities
// that fabricate every result, attest and pass each other and fail every honest result they verify) and the
// summary's per-epoch hostile-majority figures. What the attack achieves depends on the protocol; this test
// checks the accounting: every figure is recomputed here from the relay's own database (kept with --keep) —
// who sent each accepted result (the results table), which identities are sybils (the clients table's device
// kind), which verdicts the coordinator took (the transition log) — and from the sybil process's log.
import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestnetResult } from '../src/testnet/index.ts';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
const TIMEOUT_S = 420;
let logs: string | null = null;

/** The summary; the exit status is not checked (it is 1 when the attack dropped an honest trainer). */
async function testnet(...args: string[]): Promise<TestnetResult> {
  const stdout = await new Promise<string>((resolve) =>
    execFile(
      process.execPath,
      [bin, 'local-testnet', '--json', '--keep', '--timeout', String(TIMEOUT_S), ...args],
      { timeout: (TIMEOUT_S + 60) * 1000, maxBuffer: 64 * 1024 * 1024 },
      (_err, out, stderr) => {
        if (!out.trim()) console.error(stderr.slice(-4000));
        resolve(out);
      },
    ),
  );
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] as string) as TestnetResult;
}

interface Accepted {
  commitment: string | null;
}

/** Per epoch, from the relay's database: accepted results of applied rounds, and the sybils' among them. */
function fromDatabase(db: DatabaseSync) {
  const sybils = new Set(
    (db.prepare("SELECT id FROM clients WHERE device_kind = 'sybil'").all() as { id: string }[]).map(
      (r) => r.id,
    ),
  );
  const sender = new Map(
    (
      db.prepare('SELECT commitment, sender FROM results').all() as { commitment: string; sender: string }[]
    ).map((r) => [r.commitment, r.sender]),
  );
  const rounds = db.prepare('SELECT epoch, height, accepted FROM rounds ORDER BY step').all() as {
    epoch: number;
    height: number;
    accepted: string | null;
  }[];
  const last = new Map<number, number>();
  for (const r of rounds) last.set(r.epoch, Math.max(last.get(r.epoch) ?? -1, r.height));
  const perEpoch = new Map<number, { accepted: number; sybil: number; commitments: string[] }>();
  for (const r of rounds) {
    // Peers apply every round of an epoch but its last two.
    if (r.height >= (last.get(r.epoch) as number) - 1 || r.accepted === null) continue;
    const e = perEpoch.get(r.epoch) ?? { accepted: 0, sybil: 0, commitments: [] };
    for (const a of JSON.parse(r.accepted) as Accepted[]) {
      if (a.commitment === null) continue;
      e.accepted++;
      if (sybils.has(sender.get(a.commitment) ?? '')) {
        e.sybil++;
        e.commitments.push(a.commitment);
      }
    }
    perEpoch.set(r.epoch, e);
  }
  const verdicts = { pass: 0, fail: 0 };
  for (const { label } of db
    .prepare('SELECT label FROM transition_log WHERE label LIKE \'{"type":"verdict"%\'')
    .all() as { label: string }[]) {
    const v = JSON.parse(label) as { id: string; pass: boolean };
    if (sybils.has(v.id)) verdicts[v.pass ? 'pass' : 'fail']++;
  }
  return { sybils, perEpoch, verdicts };
}

afterAll(async () => {
  if (logs) await rm(logs, { recursive: true, force: true });
});

describe('local-testnet --adversary sybil:N', () => {
  it(
    'reports per epoch the attackers’ share of applied results, garbage applied and their verdicts, as the relay recorded them',
    async () => {
      // Two epochs (the sybils join during the first and act from the second): a 30 s epoch holds at most 15
      // rounds of ≥ 2 s, so 24 steps always reach the second.
      const r = await testnet(
        '--num-clients',
        '2',
        '--adversary',
        'sybil:4',
        '--steps',
        '24',
        '--epoch-time',
        '30',
        '--round-witness-time',
        '2',
      );
      logs = r.logs;
      expect(logs).not.toBeNull();
      const db = new DatabaseSync(join(logs as string, 'relay', 'relay.db'), { readOnly: true });
      const { sybils, perEpoch, verdicts } = fromDatabase(db);
      db.close();
      expect(sybils.size).toBe(4);
      expect(r.adversaries_joined).toBe(4);

      // The sybils acted: some of their results were accepted in an applied round (else nothing is checked).
      const sybilAccepted = [...perEpoch.values()].reduce((n, e) => n + e.sybil, 0);
      expect(sybilAccepted).toBeGreaterThan(0);
      for (const e of r.by_epoch) {
        const want = perEpoch.get(e.epoch) ?? { accepted: 0, sybil: 0 };
        expect({ epoch: e.epoch, accepted: e.results_accepted, sybil: e.attacker_results_accepted }).toEqual({
          epoch: e.epoch,
          accepted: want.accepted,
          sybil: want.sybil,
        });
        expect(e.attacker_results_applied).toBeLessThanOrEqual(e.attacker_results_accepted);
        expect(e.attacker_share).toBe(
          e.results_applied > 0 ? e.attacker_results_applied / e.results_applied : null,
        );
      }
      expect(r.by_epoch.map((e) => e.epoch).sort()).toEqual(
        expect.arrayContaining([...perEpoch.keys()].sort()),
      );

      // Every result a sybil sent is fabricated: its process logged each commitment it sent.
      const sybilLog = await readFile(join(logs as string, 'logs', 'adversary-2-sybil.log'), 'utf8');
      const fabricated = new Set(
        sybilLog
          .split('\n')
          .filter((l) => l.includes('"fabricated"'))
          .map((l) => (JSON.parse(l) as { commitment: string }).commitment),
      );
      for (const e of perEpoch.values()) for (const c of e.commitments) expect(fabricated.has(c)).toBe(true);
      const applied = r.by_epoch.reduce((n, e) => n + e.attacker_results_applied, 0);
      expect(r.fabricated_applied).toBe(applied);

      // The verdicts the sybils sent, as the coordinator took them.
      const sum = (k: 'attacker_verdicts_pass' | 'attacker_verdicts_fail') =>
        r.by_epoch.reduce((n, e) => n + e[k], 0);
      expect({ pass: sum('attacker_verdicts_pass'), fail: sum('attacker_verdicts_fail') }).toEqual(verdicts);
    },
    8 * 60_000,
  );
});
