// A run's parameter hashes: the reports clients send for the latest epoch end, core's verdict over them, and
// the agreed hash the run advertises (and checkpoints must match), all kept in relay.db.
import { admitParamHash, bytesToHex, hexToBytes, paramHashVerdict } from '@meshtrain/core';
import type {
  AgreedEpoch,
  EpochEnd,
  ParamHash,
  ParamHashVerdict,
  ProtocolRefusal,
  SnapshotParamHash,
} from '@meshtrain/core';
import type { ParamHashReport } from '@meshtrain/client/relay-api';
import type { Clock } from '../run-host.ts';
import type { EpochEndRow, RelayStore } from '../store.ts';

export class RunParamHashes {
  private readonly store: RelayStore;
  private readonly runId: string;
  private readonly clock: Clock;
  /** The run's advertised parameter hash (the newest agreed one). */
  current: SnapshotParamHash | undefined;

  constructor(store: RelayStore, runId: string, clock: Clock) {
    this.store = store;
    this.runId = runId;
    this.clock = clock;
    this.current = this.load();
  }

  /** The newest epoch end with an agreed hash: what StateSnapshot advertises as the run's parameter hash. */
  private load(): SnapshotParamHash | undefined {
    const agreed = this.agreedEpochs().at(-1);
    return agreed === undefined ? undefined : { epoch: agreed.epoch, hash: hexToBytes(agreed.hash, 32) };
  }

  /** The epoch end that parameter hashes are taken for now (the latest one the coordinator reached). */
  private latestEpochEnd(): (EpochEnd & { row: EpochEndRow }) | null {
    const row = this.store.checkpoints.epochEnds(this.runId).at(-1);
    return row ? { epoch: row.epoch, step: row.step, voters: row.voters, row } : null;
  }

  /**
   * A client's ParamHash: recorded if core admits it for the latest epoch end, then judged by core's verdict.
   * An agreed hash becomes the run's advertised hash and the one checkpoints must match.
   */
  report(
    client: string,
    p: ParamHash,
  ): { verdict: ParamHashVerdict; newlyMismatched: string[] } | ProtocolRefusal {
    const end = this.latestEpochEnd();
    const refused = admitParamHash(this.runId, end, client, p);
    if (refused) return refused;
    const e = end as EpochEnd & { row: EpochEndRow };
    const before = new Set(
      paramHashVerdict(e, this.store.checkpoints.paramHashes(this.runId, e.epoch)).mismatched,
    );
    this.store.checkpoints.putParamHash(this.runId, {
      epoch: e.epoch,
      client,
      step: e.step,
      hash: bytesToHex(p.hash),
      reported_at: this.clock(),
    });
    const verdict = paramHashVerdict(e, this.store.checkpoints.paramHashes(this.runId, e.epoch));
    if (verdict.agreed !== null && e.row.agreed_hash !== verdict.agreed) {
      this.store.checkpoints.setAgreedHash(this.runId, e.epoch, verdict.agreed);
      this.current = { epoch: e.epoch, hash: hexToBytes(verdict.agreed, 32) };
    }
    return { verdict, newlyMismatched: verdict.mismatched.filter((c) => !before.has(c)) };
  }

  /** Epoch ends with an agreed hash, oldest first: the only (epoch, step, hash) checkpoints may carry. */
  agreedEpochs(): AgreedEpoch[] {
    return this.store.checkpoints
      .epochEnds(this.runId)
      .flatMap((r) =>
        r.agreed_hash === null ? [] : [{ epoch: r.epoch, step: r.step, hash: r.agreed_hash }],
      );
  }

  /** Every recorded epoch end with core's verdict over its reports, oldest first. */
  reports(): ParamHashReport[] {
    return this.store.checkpoints.epochEnds(this.runId).map((r) => {
      const v = paramHashVerdict(r, this.store.checkpoints.paramHashes(this.runId, r.epoch));
      return {
        epoch: r.epoch,
        step: r.step,
        voters: r.voters.length,
        majority: v.agreed,
        reports: v.reports,
        mismatched: v.mismatched,
      };
    });
  }
}
