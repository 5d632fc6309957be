// Committee and witness selection for one round (docs/protocol.md "Committee and witness selection").
// Everything derives from the round's `random_seed` and the number of clients in the round, so every peer
// computes the same roles.
import { sha256 } from '@noble/hashes/sha2.js';
import { SelectionError } from './errors.ts';
import { seedToLeBytes } from './hex.ts';
import { SwapOrNot } from './swap-or-not.ts';

export type Committee = 'TieBreaker' | 'Verifier' | 'Trainer';

export interface CommitteeProof {
  committee: Committee;
  /** Committee position of the client (swap-or-not under the "committee" salt). */
  position: number;
  /** The client's index in the round's roster. */
  index: number;
}

export interface WitnessProof {
  /** Witness position of the client (swap-or-not under the "witness" salt). */
  position: number;
  index: number;
  witness: boolean;
}

export interface RoundSelectionParams {
  /** The round's u64 seed as 16 hex digits. */
  randomSeed: string;
  /** Number of clients taking part in the round (the roster length). */
  clientsLen: number;
  /** Effective witness count W for the round (see `effectiveWitnessCount`). */
  witnessCount: number;
  verificationPercent: number;
  /** Psyche always uses 0 (its tie-breaker path is unimplemented). */
  tieBreakers?: number;
}

const encoder = new TextEncoder();

function saltSeed(seed32: Uint8Array, purpose: 'committee' | 'witness'): Uint8Array {
  const tag = encoder.encode(purpose);
  const msg = new Uint8Array(seed32.length + tag.length);
  msg.set(seed32);
  msg.set(tag, seed32.length);
  return sha256(msg);
}

/**
 * W for a round: `witness_nodes` when set, else `max_witnesses`, never more than the clients in the round.
 * Psyche's W for witness_nodes = 0 was "however many witnesses actually submitted", which made the quorum
 * check vacuous (docs/protocol.md "Witnesses and quorum"); capping by the roster also keeps W reachable when
 * clients have left.
 */
export function effectiveWitnessCount(
  witnessNodes: number,
  maxWitnesses: number,
  clientsLen: number,
): number {
  const wanted = witnessNodes > 0 ? Math.min(witnessNodes, maxWitnesses) : maxWitnesses;
  return Math.max(0, Math.min(wanted, clientsLen));
}

export class RoundSelection {
  readonly clientsLen: number;
  readonly witnessCount: number;
  readonly tieBreakers: number;
  readonly verifiers: number;
  private readonly committeeShuffle: SwapOrNot;
  private readonly witnessShuffle: SwapOrNot;
  private witnessList: number[] | undefined;
  private trainerList: number[] | undefined;

  constructor(params: RoundSelectionParams) {
    const { clientsLen, witnessCount, verificationPercent } = params;
    const tieBreakers = params.tieBreakers ?? 0;
    if (!(verificationPercent >= 0 && verificationPercent <= 100)) {
      throw new SelectionError(
        'BadArgument',
        `verification_percent must be within 0..100, got ${verificationPercent}`,
      );
    }
    if (!Number.isInteger(witnessCount) || witnessCount < 0 || witnessCount > clientsLen) {
      throw new SelectionError(
        'BadArgument',
        `witness count ${witnessCount} must be within 0..${clientsLen}`,
      );
    }
    this.clientsLen = clientsLen;
    this.witnessCount = witnessCount;
    this.tieBreakers = Math.min(tieBreakers, clientsLen);
    this.verifiers = Math.floor(((clientsLen - this.tieBreakers) * verificationPercent) / 100);
    const seed32 = sha256(seedToLeBytes(params.randomSeed));
    this.committeeShuffle = new SwapOrNot(clientsLen, saltSeed(seed32, 'committee'));
    this.witnessShuffle = new SwapOrNot(clientsLen, saltSeed(seed32, 'witness'));
  }

  committeeAtPosition(position: number): Committee {
    if (position < this.tieBreakers) return 'TieBreaker';
    if (position < this.tieBreakers + this.verifiers) return 'Verifier';
    return 'Trainer';
  }

  committeeOf(index: number): Committee {
    return this.committeeAtPosition(this.committeeShuffle.position(index));
  }

  committeeProof(index: number): CommitteeProof {
    const position = this.committeeShuffle.position(index);
    return { committee: this.committeeAtPosition(position), position, index };
  }

  witnessProof(index: number): WitnessProof {
    const position = this.witnessShuffle.position(index);
    return { position, index, witness: position < this.witnessCount };
  }

  isWitness(index: number): boolean {
    return this.witnessShuffle.position(index) < this.witnessCount;
  }

  /** Roster indices of the round's witnesses, in witness-position order; costs W inverse shuffles, not n. */
  witnesses(): readonly number[] {
    if (!this.witnessList) {
      this.witnessList = [];
      for (let p = 0; p < this.witnessCount; p++) this.witnessList.push(this.witnessShuffle.indexAt(p));
    }
    return this.witnessList;
  }

  /** Roster indices whose committee is Trainer, ascending (epoch order, as Psyche's data assignment wants). */
  trainers(): readonly number[] {
    if (!this.trainerList) {
      const nonTrainers = this.tieBreakers + this.verifiers;
      if (nonTrainers === 0) {
        this.trainerList = Array.from({ length: this.clientsLen }, (_, i) => i);
      } else {
        const positions = this.committeeShuffle.positions();
        this.trainerList = [];
        for (let i = 0; i < this.clientsLen; i++)
          if ((positions[i] as number) >= nonTrainers) this.trainerList.push(i);
      }
    }
    return this.trainerList;
  }

  verifyCommitteeProof(proof: CommitteeProof): boolean {
    if (!validIndex(proof.index, this.clientsLen)) return false;
    const position = this.committeeShuffle.position(proof.index);
    return proof.position === position && proof.committee === this.committeeAtPosition(position);
  }

  verifyWitnessProof(proof: WitnessProof): boolean {
    if (!validIndex(proof.index, this.clientsLen)) return false;
    const position = this.witnessShuffle.position(proof.index);
    return proof.position === position && proof.witness === position < this.witnessCount;
  }
}

function validIndex(index: unknown, n: number): index is number {
  return typeof index === 'number' && Number.isInteger(index) && index >= 0 && index < n;
}
