// What a joined session does with the frames that carry a client's work: a signed result (stored with the
// coordinator's record of it), an announce (checked against the stored result), and a parameter hash report
// (with a notice to clients that became the minority). Each refuses with the session's Refusal.
import {
  admitAnnounce,
  admitResult,
  bytesToHex,
  encodeControlError,
  paramHashMismatch,
  trainingResultBytesOf,
} from '@meshtrain/core';
import type { Announce, ParamHash, SignedResult } from '@meshtrain/core';
import type { Relay } from '../relay.ts';
import type { RunHost } from '../run-host.ts';
import { must, Refusal } from './refusal.ts';

/** The joined session a frame came from. */
export interface Who {
  runId: string;
  /** The client's identity (hex public key). */
  id: string;
  host: RunHost;
}

/**
 * Core admits the result, then the coordinator records it (one result per batch: a second, different one
 * ejects the sender) in the same transaction that stores its frame. Nothing is stored unless both agree.
 */
export function storeSignedResult(relay: Relay, who: Who, s: SignedResult, bytes: Uint8Array): void {
  const { runId, id, host } = who;
  const admitted = must(admitResult(host.state, id, s, host.resultSpec, relay.limits));
  const { event } = admitted;
  const store = relay.store;
  const at = relay.clock();
  const r = host.apply(event, (r) => {
    if (!r.error) {
      store.rounds.insertResult(
        runId,
        {
          commitment: event.commitment,
          step: event.step,
          batch_start: event.batch.start,
          batch_end: event.batch.end,
          sender: id,
          frame: bytes,
        },
        at,
      );
    } else if (r.error.code === 'Equivocation') {
      const first = store.rounds
        .resultsForSteps(runId, [event.step])
        .find(
          (x) => x.sender === id && x.batch_start === event.batch.start && x.batch_end === event.batch.end,
        );
      store.rounds.addEvidence(runId, {
        at,
        client: id,
        kind: 'equivocation',
        detail: r.error.message,
        first: first?.frame ?? new Uint8Array(0),
        second: bytes,
      });
    }
  });
  // The same result sent again (a client retry) is acknowledged and changes nothing.
  if (r.error && r.error.code !== 'DuplicateResult')
    throw new Refusal(
      r.error.code === 'Equivocation' ? 'equivocation' : r.error.code,
      r.error.message,
      false,
    );
}

/**
 * An announce is checked and acknowledged but not forwarded: the coordinator state names every admitted
 * commitment, which is what peers fetch by (from peers, then the relay's HTTP route), so forwarding each
 * result's announce to every client would only add ~180 bytes per result per client.
 */
export function checkAnnounce(relay: Relay, who: Who, a: Announce): void {
  const { runId, id, host } = who;
  const commitment = bytesToHex(a.commitment);
  const stored = relay.store.rounds.result(runId, commitment);
  must(
    admitAnnounce(
      host.state,
      id,
      a,
      stored && {
        sender: stored.sender,
        step: stored.step,
        batch: { start: stored.batch_start, end: stored.batch_end },
        commitment: stored.commitment,
        trainingResultBytes: trainingResultBytesOf(stored.frame.length),
      },
    ),
  );
}

export function reportParamHash(relay: Relay, who: Who, p: ParamHash): void {
  const { runId, id, host } = who;
  const { verdict, newlyMismatched } = must(host.reportParamHash(id, p));
  relay.hooks.paramHash(runId, p.epoch, verdict.reports, verdict.mismatched.length);
  // Tell clients that just became the minority (not this one: it gets the reply below).
  for (const client of newlyMismatched) {
    if (client === id) continue;
    const mine = relay.store.checkpoints.paramHashes(runId, p.epoch).find((r) => r.client === client);
    const notice = mine && paramHashMismatch(p.epoch, verdict, mine.hash);
    if (!notice) continue;
    for (const s of relay.sessionsOf(runId))
      if (s.identity === client)
        s.send(
          encodeControlError({ requestId: 0, code: notice.code, message: notice.message }, relay.limits),
        );
  }
  must(paramHashMismatch(p.epoch, verdict, bytesToHex(p.hash)) ?? true);
}
