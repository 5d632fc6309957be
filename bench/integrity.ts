// bench:integrity — verification of work (the run's verification_percent) on real models, with the real
// client, coordinator and optimizer code in this process (bench/lib/in-process-network.ts):
//  1. detection: how often a verifier fails each kind of fabricated result (random signs, a sign-flipped
//     honest result, a stale replay, a result computed on another batch; a dense result is refused at
//     admission instead), and from that the chance a cheater is ejected within a run at the default
//     verification_percent — cross-checked by trials: whole runs at that percentage with a cheater of every
//     kind, counting in how many it is ejected;
//  2. honest false positives: how often a verifier fails an honest result, on CPU and across CPU and WebGPU
//     clients (a whole micro-preset run; on SwiftShader without a GPU), with the least fingerprint and update
//     agreements seen per device pair — what the thresholds in packages/core/src/protocol/verification.ts
//     must stay clear of;
//  3. throughput: wall time per round with verification off, at the default percentage and at 100%.
// Progress on stderr; prints one JSON object on stdout (`--json`: nothing else).
//
//   npm run -s bench:integrity -- --json [--verification-percent P] [--part detection,trials,throughput,mixed]
import { cpus, loadavg } from 'node:os';
import { createRequire } from 'node:module';
import {
  CONCLUSIVE_UPDATE_AGREEMENT,
  conclusiveFailure,
  CONFIRMING_STRIKES,
  FINGERPRINT_BITS,
  FINGERPRINT_COMPARED_SHARE,
  MIN_FINGERPRINT_AGREEMENT,
  MIN_UPDATE_AGREEMENT,
  STRIKE_WINDOW,
  VERIFIERS_PER_RESULT,
} from '@meshtrain/core';
import { modelConfigForRun, parameterCount } from '@meshtrain/model';
import { ensureBrownDataset } from '../apps/node-trainer/src/dataset/brown.ts';
import { localDataSource } from '../apps/node-trainer/src/net/local-data.ts';
import {
  integrityRun,
  parseIntegrityFlags,
  UsageError,
  USAGE,
  type FabricatedKind,
  type IntegrityFlags,
} from './lib/integrity-config.ts';
import {
  runDetection,
  runThroughput,
  type DetectionRun,
  type IntegrityContext,
  type NetworkOutcome,
} from './lib/integrity-detection.ts';
import { runMixed, type MixedRun } from './lib/integrity-mixed.ts';
import { runTrials } from './lib/integrity-trials.ts';
import {
  byDevicePair,
  byResult,
  caughtWithin,
  collectVerdicts,
  failedRounds,
  lowest,
  percentFor,
  roundsFor,
  summarize,
  type Member,
  type SampledOutcome,
  verifiesHonestly,
  wilsonLower,
  type VerdictRecord,
} from './lib/integrity-verdicts.ts';
import { defaultRun } from './lib/quality-config.ts';
import { SharedOrt } from './lib/shared-ort.ts';
import { StepProgress } from './lib/step-progress.ts';

const BAR = 0.99;

/** Honest peers' results judged by verifiers that verify honestly: the false-positive side. */
function honestSide(records: readonly VerdictRecord[], members: readonly Member[]) {
  const judged = records.filter((r) => r.trainer.role === 'honest' && verifiesHonestly(r.verifier));
  const results = byResult(judged);
  return {
    ...summarize(judged),
    results_verified: results.length,
    results_failed: results.filter((g) => g.some((r) => !r.pass)).length,
    // Strikes under core's rule (every verifier of the result failed it), and those that were conclusive.
    results_failed_by_all: results.filter((g) => g.length >= VERIFIERS_PER_RESULT && g.every((r) => !r.pass))
      .length,
    results_failed_conclusively: results.filter(
      (g) => g.length >= VERIFIERS_PER_RESULT && g.every((r) => !r.pass && conclusiveFailure(r)),
    ).length,
    by_device_pair: byDevicePair(judged),
    lowest_update_agreement: lowest(judged, 8),
    failed_rounds: failedRounds(judged, members),
  };
}

function protocolOf(o: NetworkOutcome) {
  const tally = (xs: { role: string; key: string }[]) => {
    const out: Record<string, number> = {};
    for (const x of xs) out[`${x.role}: ${x.key}`] = (out[`${x.role}: ${x.key}`] ?? 0) + 1;
    return out;
  };
  return {
    steps: o.steps,
    rounds: o.rounds,
    epochs: o.epochs,
    results_applied: o.resultsApplied,
    replays: o.replays,
    honest_ejected: o.members.filter((m) => m.role === 'honest' && o.ejected.includes(m.peer.id)).length,
    honest_replicas_identical: o.honestReplicasIdentical,
    refusals: tally(o.refusals.map((r) => ({ role: r.role, key: r.code }))),
    errors: tally(o.errors.map((e) => ({ role: e.role, key: e.message.slice(0, 120) }))),
    virtual_seconds: o.virtualSeconds,
    wall_seconds: o.wallSeconds,
    ort_seconds: o.ortSeconds,
  };
}

/** Rounds a cheater trains in the default run when it joins at the start: all but the final drain rounds. */
function defaultRunRounds(): number {
  return defaultRun().config.total_steps - 2;
}

function perKind(kind: FabricatedKind, d: DetectionRun, records: VerdictRecord[], percent: number) {
  const cheaters = d.members.filter((m) => m.role === kind);
  const sent = cheaters.flatMap((m) => m.sent.filter((s) => s.fabricated));
  const base = {
    cheaters: cheaters.length,
    fabricated_results_sent: sent.length,
  };
  const rounds = defaultRunRounds() - (kind === 'stale-replay' ? 1 : 0);
  if (kind === 'dense') {
    const refused = sent.filter((s) => s.refused !== null).length;
    const rate = sent.length ? refused / sent.length : null;
    return {
      ...base,
      per_check: {
        check: 'admission (core checkResultShape), every result',
        refused,
        rate,
        refusal: sent.find((s) => s.refused)?.refused ?? null,
      },
      within_run: {
        method:
          'admission: every result is checked, none is sampled; a refused result is never stored, witnessed or applied',
        probability: rate,
        meets_bar: rate !== null && rate >= BAR,
      },
      cheaters_ejected: cheaters.filter((m) => d.ejected.includes(m.peer.id)).length,
      // It delivers nothing the host takes: health checks drop it from the epoch (it may come back).
      cheaters_still_members_at_end: cheaters.filter((m) => d.membersAtEnd.includes(m.peer.id)).length,
    };
  }
  const judged = records.filter(
    (r) => r.trainer.role === kind && r.fabricated && verifiesHonestly(r.verifier),
  );
  const results = byResult(judged).filter((g) => g.length >= VERIFIERS_PER_RESULT);
  const bothFailed = results.filter((g) => g.every((r) => !r.pass)).length;
  // Core's rule: both verifiers' failures conclusive confirm at once, other results both fail are strikes.
  const bothConclusive = results.filter((g) => g.every((r) => !r.pass && conclusiveFailure(r))).length;
  const n = results.length;
  const q: SampledOutcome = {
    conclusive: n ? bothConclusive / n : 0,
    strike: n ? (bothFailed - bothConclusive) / n : 0,
  };
  const conclusiveLow = wilsonLower(bothConclusive, n);
  const qLow: SampledOutcome = {
    conclusive: conclusiveLow,
    strike: Math.max(0, wilsonLower(bothFailed, n) - conclusiveLow),
  };
  const sampledCheaters = cheaters.filter((m) => records.some((r) => r.trainer === m && r.fabricated));
  const probability = caughtWithin(percent, q, rounds);
  return {
    ...base,
    per_check: {
      check: 'a verifier recomputes the gradient (fingerprint and update agreement)',
      ...summarize(judged),
      detection_rate: judged.length ? judged.filter((r) => !r.pass).length / judged.length : null,
      failed_on_fingerprint: judged.filter((r) => r.fingerprintAgreement < MIN_FINGERPRINT_AGREEMENT).length,
      failed_on_update: judged.filter((r) => r.updateAgreement < MIN_UPDATE_AGREEMENT).length,
    },
    sampled_results_with_two_verdicts: n,
    both_verifiers_failed: bothFailed,
    both_failed_conclusively: bothConclusive,
    both_fail_rate: n ? bothFailed / n : null,
    both_fail_rate_95_lower: n ? wilsonLower(bothFailed, n) : null,
    conclusive_rate: n ? q.conclusive : null,
    cheaters_with_a_sampled_fabricated_result: sampledCheaters.length,
    cheaters_ejected: sampledCheaters.filter((m) => d.ejected.includes(m.peer.id)).length,
    within_run: {
      method:
        `computed: 1 − P(no conclusive result and fewer than ${CONFIRMING_STRIKES} strikes in R rounds), ` +
        'each round sampled with p = verification_percent/100 (independently) and then conclusive (c) or a ' +
        'strike (s) with the measured shares of sampled fabricated results both verifiers failed ' +
        '(conclusively, otherwise): 1 − Σ_{j<K} C(R,j)(p·s)^j(1 − p·c − p·s)^(R−j), R = rounds the cheater ' +
        'trains in the default run when it cheats from the start',
      verification_percent: percent,
      cheating_rounds: rounds,
      probability,
      probability_at_95_lower_q: caughtWithin(percent, qLow, rounds),
      rounds_for_99: roundsFor(BAR, percent, q),
      least_percent_for_99: percentFor(BAR, q, rounds),
      meets_bar: probability >= BAR,
    },
  };
}

function detectionReport(d: DetectionRun, f: IntegrityFlags, percent: number) {
  const records = collectVerdicts(d.members);
  const model = modelConfigForRun(d.run);
  return {
    settings: {
      preset: f.preset,
      parameters: parameterCount(model),
      honest_peers: f.honest,
      global_batch: f.batchSize,
      seq_len: f.seqLen,
      warmup_steps: f.warmupSteps,
      cheat_epochs: f.cheatEpochs,
      epoch_time_virtual_s: f.epochTime,
      verification_percent: 100,
      cheaters_first_joined_in_epoch: d.firstCheatEpoch,
    },
    per_kind: Object.fromEntries(f.kinds.map((k) => [k, perKind(k, d, records, percent)])),
    honest: honestSide(records, d.members),
    verdicts_by_other_batch_cheaters: summarize(records.filter((r) => !verifiesHonestly(r.verifier))),
    protocol: protocolOf(d),
  };
}

function mixedReport(o: MixedRun, f: IntegrityFlags) {
  const records = collectVerdicts(o.members);
  const honest = honestSide(records, o.members);
  const protocol = protocolOf(o);
  return {
    settings: {
      preset: f.mixedPreset,
      parameters: o.parameters,
      cpu_clients: f.mixedCpu,
      webgpu_clients: f.mixedWebgpu,
      webgpu: `onnxruntime-node webgpu EP + DisTrO WGSL on Dawn (${o.adapter})`,
      global_batch: f.mixedBatch,
      seq_len: f.mixedSeqLen,
      steps: f.mixedSteps,
      verification_percent: f.mixedPercent,
    },
    honest,
    honest_ejected: protocol.honest_ejected,
    protocol,
    seconds: o.seconds,
  };
}

async function main(): Promise<number> {
  let flags: IntegrityFlags;
  try {
    flags = parseIntegrityFlags(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError) && !(e instanceof TypeError)) throw e;
    if (e.message) console.error(e.message);
    console.error(USAGE);
    return e.message ? 2 : 0;
  }
  const started = performance.now();
  const loadStart = loadavg();
  const log = (line: string) => console.error(line);
  const percent = flags.verificationPercent;
  log(
    `bench:integrity: verification_percent ${percent} (${flags.verificationPercentSource}); parts ${flags.parts.join(', ')}; ` +
      `load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`,
  );
  if (percent === 0)
    log(
      'the default run verifies nothing (verification_percent = 0): within-run detection is 0; pass --verification-percent',
    );
  const dataDir = flags.data ?? (await ensureBrownDataset());
  const data = await localDataSource(dataDir, flags.seqLen);
  const ctx: IntegrityContext = {
    flags,
    dataDir,
    data,
    progress: (label, total) => new StepProgress(label, total, flags.progressEvery),
    log,
  };

  const report: Record<string, unknown> = {
    bench: 'integrity',
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model ?? 'unknown',
      load_average_start: loadStart,
      node: process.versions.node,
      onnxruntime_node: createRequire(import.meta.url)('onnxruntime-node/package.json').version as string,
      vk_icd_filenames: process.env.VK_ICD_FILENAMES ?? null,
    },
    thresholds: {
      MIN_FINGERPRINT_AGREEMENT,
      MIN_UPDATE_AGREEMENT,
      FINGERPRINT_COMPARED_SHARE,
      FINGERPRINT_BITS,
      VERIFIERS_PER_RESULT,
      CONCLUSIVE_UPDATE_AGREEMENT,
      CONFIRMING_STRIKES,
      STRIKE_WINDOW,
    },
    verification_percent: { value: percent, source: flagsSource(flags) },
    acceptance_bar: BAR,
  };
  const acceptance: Record<string, boolean> = {};

  if (flags.parts.includes('detection')) {
    const d = await runDetection(ctx);
    const r = detectionReport(d, flags, percent);
    report.detection = r;
    for (const [kind, k] of Object.entries(r.per_kind))
      acceptance[`${kind} caught within the run ≥ ${BAR * 100}%`] = k.within_run.meets_bar;
    acceptance['detection run: no honest client ejected'] = r.protocol.honest_ejected === 0;
    for (const [kind, k] of Object.entries(r.per_kind))
      log(
        `${kind}: per check ${JSON.stringify('detection_rate' in k.per_check ? k.per_check.detection_rate : k.per_check.rate)}, ` +
          `within the run ${(k.within_run.probability ?? 0).toFixed(6)} (${k.cheaters} cheaters, ${k.cheaters_ejected} ejected)`,
      );
    log(
      `honest (cpu): ${r.honest.failed}/${r.honest.verdicts} verdicts failed, fingerprint min ` +
        `${r.honest.fingerprint_agreement?.min}, update min ${r.honest.update_agreement?.min}`,
    );
  }

  if (flags.parts.includes('trials')) {
    if (percent === 0) report.trials = { skipped: 'verification_percent is 0: nothing is sampled' };
    else {
      const trials = await runTrials(ctx, percent);
      const kinds = Object.keys(trials[0]?.ejected_at_step ?? {});
      const perKind = Object.fromEntries(
        kinds.map((k) => {
          const at = trials.map((t) => t.ejected_at_step[k] ?? null);
          const caught = at.filter((x): x is number => x !== null);
          return [
            k,
            {
              ejected_in_runs: caught.length,
              runs: trials.length,
              share: caught.length / trials.length,
              ejected_at_step: at,
              fabricated_results_before_ejection: trials.map((t) => t.fabricated_sent[k] ?? 0),
            },
          ];
        }),
      );
      report.trials = {
        method:
          'measured: runs of the default run (its length, epochs and timers) at the verification percentage, ' +
          `${flags.trialPreset} model, one cheater of every kind from the first round; a run ends once all are ejected`,
        verification_percent: percent,
        per_kind: perKind,
        honest_ejected: trials.reduce((n, t) => n + t.honest_ejected, 0),
        honest_replicas_identical: trials.every((t) => t.honest_replicas_identical),
        runs: trials,
      };
      acceptance['trials: no honest client ejected'] = trials.every((t) => t.honest_ejected === 0);
      for (const [k, v] of Object.entries(perKind))
        log(
          `trials ${k}: ejected in ${v.ejected_in_runs}/${v.runs} runs, at steps ${JSON.stringify(v.ejected_at_step)}`,
        );
    }
  }

  if (flags.parts.includes('throughput')) {
    const shape = integrityRun(flags, { percent: 0, steps: 8, peers: flags.honest });
    const ort = new SharedOrt(modelConfigForRun(shape), flags.seqLen, shape.meshtrain.micro_batch_size, {
      intraOpThreads: flags.threads,
      spinning: false,
    });
    const runs = [];
    try {
      for (const p of [...new Set([0, percent, 100])]) runs.push(await runThroughput(ctx, ort, p));
    } finally {
      await ort.dispose();
    }
    const off = runs.find((r) => r.verification_percent === 0);
    const at = runs.find((r) => r.verification_percent === percent);
    report.throughput = {
      settings: {
        preset: flags.preset,
        honest_peers: flags.honest,
        global_batch: flags.batchSize,
        seq_len: flags.seqLen,
      },
      note: 'one process: the peers share the CPU, so a round lasts as long as all their work together',
      runs,
      cost_at_default_percent:
        off && at
          ? {
              percent,
              seconds_per_round_ratio: at.seconds_per_round / off.seconds_per_round,
              cpu_seconds_per_round_ratio: at.cpu_seconds_per_round / off.cpu_seconds_per_round,
            }
          : null,
    };
    for (const r of runs)
      log(
        `throughput ${r.verification_percent}%: ${r.seconds_per_round.toFixed(3)} s/round (${r.cpu_seconds_per_round.toFixed(3)} CPU s), ` +
          `${r.tokens_per_second.toFixed(0)} tokens/s`,
      );
  }

  if (flags.parts.includes('mixed')) {
    const m = mixedReport(await runMixed(ctx), flags);
    report.mixed = m;
    acceptance[`mixed ${flags.mixedSteps}-step ${flags.mixedPreset} run: no honest client ejected`] =
      m.honest_ejected === 0;
    log(
      `mixed: ${m.honest.failed}/${m.honest.verdicts} honest verdicts failed, ${m.honest_ejected} ejected, ` +
        `${m.protocol.wall_seconds.toFixed(0)} s; ` +
        Object.entries(m.honest.by_device_pair)
          .map(
            ([k, v]) =>
              `${k}: fingerprint min ${v.fingerprint_agreement?.min}, update min ${v.update_agreement?.min}`,
          )
          .join('; '),
    );
  }

  report.acceptance = acceptance;
  report.machine = { ...(report.machine as object), load_average_end: loadavg() };
  report.wall_seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify(report, null, flags.json ? undefined : 2));
  return 0;
}

function flagsSource(f: IntegrityFlags): string {
  return f.verificationPercentSource === 'flag'
    ? '--verification-percent'
    : 'DISTRO_RUN_TOML (packages/core/src/config/default-run.ts)';
}

process.exitCode = await main();
