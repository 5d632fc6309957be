// `node-trainer train --adversary KIND`: TEST ONLY. The trainer behaves as an attacker so that local-testnet
// can show what the protocol does with one: @meshtrain/client/testing's attack simulations wrap the honest
// client's link, data and checkpoint store (everything it sends is still signed with its own key), and
// the sybil kinds join many identities from one process (sybil.ts). A volunteer must never start this by accident,
// so it only runs against a relay on this machine (loopback) unless --i-know is given as well. Colluders
// (`lying-verifier` processes) are told each other's ids with --colluders, as one attacker would know them.
import type { CheckpointSource } from '@meshtrain/client';
import type { AdversaryKind, AdversaryParts } from '@meshtrain/client/testing';
import { bytesToHex, isHex32 } from '@meshtrain/core';
import { CliError } from '../command.ts';
import type { Output } from './options.ts';

/** The kinds `--adversary` takes: the client wrappers' (testing/adversary.ts), and `sybil`. */
export const ADVERSARY_NAMES = [
  'random-signs',
  'sign-flip',
  'stale-replay',
  'other-batch',
  'dense',
  'wrong-shape',
  'equivocate',
  'lying-witness',
  'no-upload',
  'poison-checkpoint',
  'every-third',
  'lying-verifier',
  'sybil',
  'sybil-veto',
  'sybil-idle',
] as const;

export type AdversaryName = (typeof ADVERSARY_NAMES)[number];

/** The kinds that are one process joining many identities (sybil.ts) rather than one client. */
export const SYBIL_KINDS = ['sybil', 'sybil-veto', 'sybil-idle'] as const;
export type SybilKind = (typeof SYBIL_KINDS)[number];

export function isSybilKind(kind: AdversaryName): kind is SybilKind {
  return (SYBIL_KINDS as readonly string[]).includes(kind);
}

export const ADVERSARY_USAGE =
  '\n\ntest only (local-testnet uses these; never on a real run):\n' +
  '  --adversary KIND   behave as an attacker: ' +
  `${ADVERSARY_NAMES.join(', ')}\n` +
  '  --sybils N         with a sybil kind: identities to join from this process (default 50)\n' +
  '                     sybil: each sends random results, attests and passes its fellows, fails the rest;\n' +
  '                     sybil-veto: also withholds its witness vote from honest results; sybil-idle: idles\n' +
  '  --colluders IDS    with lying-verifier: comma-separated ids whose results it passes\n' +
  '  --i-know           allow --adversary against a relay that is not on this machine';

function isLoopback(relay: string): boolean {
  let host: string;
  try {
    host = new URL(relay).hostname;
  } catch {
    return false;
  }
  return /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]' || host === 'localhost';
}

/** Checks `--adversary` (and its guard); undefined when the trainer is honest. */
export function adversaryFlag(
  kind: string | undefined,
  relay: string,
  iKnow: boolean,
): AdversaryName | undefined {
  if (kind === undefined) {
    if (iKnow) throw new CliError('--i-know only goes with --adversary');
    return undefined;
  }
  if (!(ADVERSARY_NAMES as readonly string[]).includes(kind))
    throw new CliError(`--adversary: one of ${ADVERSARY_NAMES.join(', ')}; got '${kind}'`);
  if (!isLoopback(relay) && !iKnow)
    throw new CliError(
      `--adversary is a test of the protocol (local-testnet): it attacks the run it joins. ${relay} is not ` +
        'on this machine; add --i-know if you really mean to attack it',
    );
  return kind as AdversaryName;
}

/** Parses --colluders (lowercase hex ids, comma-separated). */
export function colludersFlag(text: string | undefined, kind: AdversaryName | undefined): string[] {
  if (text === undefined) return [];
  if (kind !== 'lying-verifier') throw new CliError('--colluders only goes with --adversary lying-verifier');
  const ids = text.split(',').filter((x) => x !== '');
  for (const id of ids) if (!isHex32(id)) throw new CliError(`--colluders: '${id}' is not a 64-digit hex id`);
  return ids;
}

/** The client's parts wrapped so that it behaves as `kind` (never a sybil kind: that is not a client). */
export async function asAdversary(
  kind: Exclude<AdversaryName, SybilKind>,
  secretKey: Uint8Array,
  parts: AdversaryParts,
  io: Output,
  colluders: readonly string[] = [],
): Promise<AdversaryParts> {
  // Loaded only here: the attack simulations are test code, not part of what an honest trainer runs.
  const testing = await import('@meshtrain/client/testing');
  io.say(`ADVERSARY (test only): this trainer ${testing.ADVERSARY_KINDS[kind as AdversaryKind]}`);
  io.out({ type: 'adversary', kind });
  return testing.adversary(kind as AdversaryKind, secretKey, reportingUploads(parts, io), {
    colluders: new Set(colluders),
    onFabricated: (commitment) => io.out({ type: 'fabricated', commitment: bytesToHex(commitment) }),
  });
}

/**
 * Every checkpoint upload the adversary makes, and what the relay answered, as an event: the client retries a
 * refused upload for half a minute before it says anything, longer than a testnet waits after the run ends.
 */
function reportingUploads(parts: AdversaryParts, io: Output): AdversaryParts {
  const { checkpoints } = parts;
  const upload = checkpoints.upload?.bind(checkpoints);
  if (!upload) return parts;
  const reporting: CheckpointSource = {
    load: (step) => checkpoints.load(step),
    async upload(ck) {
      try {
        await upload(ck);
        // 2xx: stored, or the agreed checkpoint was already there (the relay then ignores the body).
        io.out({ type: 'upload', step: ck.step, ok: true });
      } catch (e) {
        io.out({ type: 'warning', message: `upload of step ${ck.step} refused: ${(e as Error).message}` });
        throw e;
      }
    },
  };
  if (checkpoints.has) reporting.has = checkpoints.has.bind(checkpoints);
  return { ...parts, checkpoints: reporting };
}
