// How many identities one source address may bring into a run. Keys are free, so a permissionless run also
// makes each identity cost a proof of work at join (core's join puzzle); this bounds what one machine can
// register however much work it does. Behind a reverse proxy every client shares the proxy's address: raise
// the limit there (or terminate TLS in front of a relay that sees real addresses).

/** Addresses remembered per run; the least recently seen are forgotten first, so memory stays bounded. */
const MAX_ADDRESSES_PER_RUN = 100_000;

export class IdentityLimits {
  private readonly max: number;
  /** runId → address → identities seen from it (insertion order = recency, for eviction). */
  private readonly runs = new Map<string, Map<string, Set<string>>>();

  constructor(maxPerAddress: number) {
    this.max = maxPerAddress;
  }

  /**
   * Records that `identity` joins `runId` from `address`; false when the address already brought `max`
   * other identities into the run. An identity seen before from that address always passes (reconnects).
   */
  admit(runId: string, address: string, identity: string): boolean {
    if (!Number.isFinite(this.max)) return true;
    let addresses = this.runs.get(runId);
    if (!addresses) this.runs.set(runId, (addresses = new Map()));
    let ids = addresses.get(address);
    if (ids) addresses.delete(address);
    else ids = new Set();
    addresses.set(address, ids);
    if (addresses.size > MAX_ADDRESSES_PER_RUN) addresses.delete(addresses.keys().next().value as string);
    if (ids.has(identity)) return true;
    if (ids.size >= this.max) return false;
    ids.add(identity);
    return true;
  }
}
