// End to end on real processes: `local-testnet --adversary sybil:N` (one process, N colluding identities
// that fabricate every result, attest and pass each other and fail every honest result they verify) against
// two honest trainers and a trusted verifier (`--trusted-verifiers 1`: a `node-trainer verify` process whose
// key the run lists in trusted_verifiers), and the summary's per-epoch hostile-majority figures. It checks
// what the anchor is for (docs/protocol.md "Trust"): the sybils, outnumbering the honest trainers two to one,
// get no fabricated result applied, are ejected, and eject or drop no honest trainer. And it checks the
// accounting: every figure is recomputed here from the relay's own database (kept with --keep) — who sent
// each accepted result (the results table), which identities are sybils and which is the verifier (the
// clients table's device kind), which verdicts and ejections the coordinator took (the transition log) — and
// from the sybil process's log.
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
/** A failed run keeps its logs, and the test prints what they say about the sybils. */
let failed = false;

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

interface Effect {
  type: string;
  id?: string;
  reason?: string;
}

/** The device kinds (SQL LIKE patterns) the sybil process and the trusted verifier join with. */
const SYBIL_KIND = 'sybil';
const VERIFIER_KIND = 'verify-only %';

/** Ids of the run's clients whose device kind matches `like`. */
function ofKind(db: DatabaseSync, like: string): Set<string> {
  return new Set(
    (db.prepare('SELECT id FROM clients WHERE device_kind LIKE ?').all(like) as { id: string }[]).map(
      (r) => r.id,
    ),
  );
}

/** Per epoch, from the relay's database: accepted results of applied rounds, and the sybils' among them. */
function fromDatabase(db: DatabaseSync) {
  const sybils = ofKind(db, SYBIL_KIND);
  const verifiers = ofKind(db, VERIFIER_KIND);
  // From the transition log, not the results table: the relay prunes stored results 8 steps behind.
  const results = (
    db.prepare('SELECT label FROM transition_log WHERE label LIKE \'{"type":"result_admitted"%\'').all() as {
      label: string;
    }[]
  ).map(({ label }) => {
    const e = JSON.parse(label) as { id: string; commitment: string };
    return { commitment: e.commitment, sender: e.id };
  });
  const sender = new Map(results.map((r) => [r.commitment, r.sender]));
  // Every result a sybil got the relay to admit, applied or not.
  const sybilSent = results.filter((r) => sybils.has(r.sender)).map((r) => r.commitment);
  const rounds = db.prepare('SELECT epoch, height, accepted FROM rounds ORDER BY step').all() as {
    epoch: number;
    height: number;
    accepted: string | null;
  }[];
  const last = new Map<number, number>();
  for (const r of rounds) last.set(r.epoch, Math.max(last.get(r.epoch) ?? -1, r.height));
  const perEpoch = new Map<number, { accepted: number; sybil: number }>();
  for (const r of rounds) {
    // Peers apply every round of an epoch but its last two.
    if (r.height >= (last.get(r.epoch) as number) - 1 || r.accepted === null) continue;
    const e = perEpoch.get(r.epoch) ?? { accepted: 0, sybil: 0 };
    for (const a of JSON.parse(r.accepted) as Accepted[]) {
      if (a.commitment === null) continue;
      e.accepted++;
      if (sybils.has(sender.get(a.commitment) ?? '')) e.sybil++;
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
  const ejected = new Map<string, string>();
  for (const { effects } of db.prepare('SELECT effects FROM transition_log').all() as { effects: string }[])
    for (const e of JSON.parse(effects || '[]') as Effect[])
      if (e.type === 'ClientEjected' && e.id) ejected.set(e.id, e.reason ?? '');
  const trusted = (db.prepare('SELECT toml FROM configs').all() as { toml: string }[]).map((r) => r.toml);
  return { sybils, verifiers, sybilSent, perEpoch, verdicts, ejected, trusted };
}

/**
 * What a failed run leaves to read: the coordinator's transitions that name a sybil, start or end an epoch, or
 * take a client out (one line each, ids shortened to their kind and first 4 hex digits), and the end of the
 * sybil process's log.
 */
async function diagnosis(dir: string): Promise<string> {
  const db = new DatabaseSync(join(dir, 'relay', 'relay.db'), { readOnly: true });
  const sybils = ofKind(db, SYBIL_KIND);
  const verifiers = ofKind(db, VERIFIER_KIND);
  const short = (id: string) => `${sybils.has(id) ? 'S' : verifiers.has(id) ? 'V' : 'H'}${id.slice(0, 4)}`;
  const clients = new Set((db.prepare('SELECT id FROM clients').all() as { id: string }[]).map((r) => r.id));
  // Only client ids: commitments are 64 hex digits too.
  const named = (text: string) => text.replace(/[0-9a-f]{64}/g, (id) => (clients.has(id) ? short(id) : id));
  const lines: string[] = [];
  for (const row of db.prepare('SELECT seq, now, label, effects FROM transition_log ORDER BY seq').all() as {
    seq: number;
    now: number;
    label: string;
    effects: string;
  }[]) {
    const sybil = [...sybils].some((id) => (row.label + row.effects).includes(id));
    if (!sybil && !/"type":"(Epoch|Client)|"to":"(Warmup|Cooldown|Finished)"/.test(row.effects)) continue;
    lines.push(
      `${row.seq} t=${row.now} ${named(row.label).slice(0, 160)} -> ${named(row.effects).slice(0, 300)}`,
    );
  }
  db.close();
  const sybilLog = await readFile(join(dir, 'logs', 'adversary-2-sybil.log'), 'utf8').catch(
    (e: Error) => e.message,
  );
  const tail = sybilLog
    .split('\n')
    .filter((l) => !l.includes('"fabricated"'))
    .slice(-30);
  return [`kept ${dir}`, ...lines, '-- sybil process log, last lines but fabricated ones:', ...tail].join(
    '\n',
  );
}

afterAll(async () => {
  if (logs && !failed) await rm(logs, { recursive: true, force: true });
});

describe('local-testnet --adversary sybil:N', () => {
  it(
    'with a trusted verifier, colluding sybils get no fabricated result applied and eject no honest trainer; the per-epoch figures are the relay’s',
    async () => {
      // Two epochs or more (the sybils join during the first and act from the second). A round can end well
      // before its 2 s witness time (a 30 s first epoch held 12 to 17 steps here), so 40 steps leave the
      // second epoch rounds to train even at 1 s a round.
      const r = await testnet(
        '--num-clients',
        '2',
        '--adversary',
        'sybil:4',
        '--trusted-verifiers',
        '1',
        '--steps',
        '40',
        '--epoch-time',
        '30',
        '--round-witness-time',
        '2',
      );
      logs = r.logs;
      expect(logs).not.toBeNull();
      try {
        const db = new DatabaseSync(join(logs as string, 'relay', 'relay.db'), { readOnly: true });
        const { sybils, verifiers, sybilSent, perEpoch, verdicts, ejected, trusted } = fromDatabase(db);
        db.close();
        expect(sybils.size).toBe(4);
        expect(r.adversaries_joined).toBe(4);
        // The verifier joined verify-only, and the run's config lists its key as trusted.
        expect(verifiers.size).toBe(1);
        expect(trusted.some((toml) => toml.includes([...verifiers][0] as string))).toBe(true);
        expect({ trusted: r.trusted_verifiers, dropped: r.trusted_verifiers_dropped }).toEqual({
          trusted: 1,
          dropped: 0,
        });
        // An anchored run with its verifier taking part gives no trust warning.
        expect(r.trust_warnings).toEqual([]);

        // The sybils acted: the relay admitted results from them (else nothing is checked).
        expect(sybilSent.length).toBeGreaterThan(0);
        // None of those stayed applied, and the sybils were caught: every result of an identity on probation is
        // checked by the trusted verifier, whose conclusive failure ejects at once.
        expect(r.fabricated_applied).toBe(0);
        expect([...perEpoch.values()].reduce((n, e) => n + e.sybil, 0)).toBe(0);
        const sybilsEjected = [...ejected].filter(([id]) => sybils.has(id));
        expect(sybilsEjected.length).toBeGreaterThan(0);
        for (const [, reason] of sybilsEjected) expect(reason).toMatch(/trusted verifier/);
        expect(r.cheaters_ejected).toBe(sybilsEjected.length);
        // No honest trainer was ejected or dropped, and the run went to its end.
        expect([...ejected.keys()].filter((id) => !sybils.has(id))).toEqual([]);
        expect(r.honest_dropped).toBe(0);
        for (const e of r.by_epoch)
          expect({ dropped: e.honest_dropped, ejected: e.honest_ejected }).toEqual({
            dropped: 0,
            ejected: 0,
          });
        expect(r.completed).toBe(true);
        for (const e of r.by_epoch) {
          const want = perEpoch.get(e.epoch) ?? { accepted: 0, sybil: 0 };
          expect({
            epoch: e.epoch,
            accepted: e.results_accepted,
            sybil: e.attacker_results_accepted,
          }).toEqual({
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
        for (const c of sybilSent) expect(fabricated.has(c)).toBe(true);
        const applied = r.by_epoch.reduce((n, e) => n + e.attacker_results_applied, 0);
        expect(r.fabricated_applied).toBe(applied);

        // The verdicts the sybils sent, as the coordinator took them.
        const sum = (k: 'attacker_verdicts_pass' | 'attacker_verdicts_fail') =>
          r.by_epoch.reduce((n, e) => n + e[k], 0);
        expect({ pass: sum('attacker_verdicts_pass'), fail: sum('attacker_verdicts_fail') }).toEqual(
          verdicts,
        );
      } catch (e) {
        failed = true;
        console.error(await diagnosis(logs as string));
        throw e;
      }
    },
    8 * 60_000,
  );
});
