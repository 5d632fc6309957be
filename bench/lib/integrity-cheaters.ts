// A cheater for bench:integrity: @meshtrain/client/testing's adversary around an honest client's parts, with
// what it really sent recorded — for each result, whether it differs from the honest result the client made
// (a stale replay's first result, for one, is honest: there is nothing to replay yet) and whether the host
// refused it at admission.
import type { CoordinatorLink } from '@meshtrain/client';
import { adversary } from '@meshtrain/client/testing';
import { decodeSignedResult } from '@meshtrain/core';
import type { FabricatedKind } from './integrity-config.ts';
import type { PeerParts } from './in-process-network.ts';

export interface SentResult {
  step: number;
  /** Not the result the honest client made. */
  fabricated: boolean;
  /** The host's refusal, when it refused the result. */
  refused: string | null;
}

function sameBytes(a: Uint8Array, b: Uint8Array | null): boolean {
  if (!b || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `kind`'s attack on `parts`; every result it sends is appended to `sent`. */
export function recordedAdversary(
  kind: FabricatedKind,
  parts: PeerParts,
  secretKey: Uint8Array,
  seed: number,
  sent: SentResult[],
): PeerParts {
  let honestFrame: Uint8Array | null = null;
  // Below the adversary: what reaches the host.
  const wire: CoordinatorLink = {
    ...parts.link,
    async submitResult(frame, announce) {
      const step = decodeSignedResult(frame).result.step;
      // An other-batch cheater's results are built honestly, but from the samples its shifted data gave it.
      const fabricated = kind === 'other-batch' || !sameBytes(frame, honestFrame);
      try {
        await parts.link.submitResult(frame, announce);
      } catch (e) {
        sent.push({ step, fabricated, refused: (e as Error).message });
        throw e;
      }
      sent.push({ step, fabricated, refused: null });
    },
  };
  const bad = adversary(kind, secretKey, { ...parts, link: wire }, { seed });
  // Above it: the honest result the client made.
  const link: CoordinatorLink = {
    ...bad.link,
    submitResult(frame, announce) {
      honestFrame = frame;
      return bad.link.submitResult(frame, announce);
    },
  };
  return { ...bad, link };
}
