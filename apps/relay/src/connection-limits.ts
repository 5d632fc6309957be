// What a connection that has not joined yet may cost the relay. Before its Join is acknowledged a coordinator
// WebSocket is anyone's: no key, no grant, nothing signed. Until then it may hold one of a bounded number of
// slots (overall and per source address), send only a few KiB, and stay only until the join timeout
// (their defaults are in defaults.ts).

/** Counts slots overall and per address; a slot is released exactly once. */
export class UnjoinedSlots {
  readonly max: number;
  readonly maxPerAddress: number;
  private total = 0;
  private readonly byAddress = new Map<string, number>();

  constructor(max: number, maxPerAddress: number) {
    this.max = max;
    this.maxPerAddress = maxPerAddress;
  }

  /** Slots held now (overall, or by one address). */
  held(address?: string): number {
    return address === undefined ? this.total : (this.byAddress.get(address) ?? 0);
  }

  /** A slot for `address` and the function that gives it back, or undefined when none is free. */
  take(address: string): (() => void) | undefined {
    const mine = this.byAddress.get(address) ?? 0;
    if (this.total >= this.max || mine >= this.maxPerAddress) return undefined;
    this.total += 1;
    this.byAddress.set(address, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total -= 1;
      const n = (this.byAddress.get(address) ?? 1) - 1;
      if (n <= 0) this.byAddress.delete(address);
      else this.byAddress.set(address, n);
    };
  }
}
