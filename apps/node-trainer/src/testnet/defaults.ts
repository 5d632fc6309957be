// What local-testnet runs when a flag is left out: read by the flag parser and printed by the usage text.
export const TESTNET_DEFAULTS = {
  steps: 40,
  randomKillInterval: 20,
  /** Share of results re-checked: high enough that a short run exercises verification every few rounds. */
  verificationPercent: 25,
  /** The relay's join puzzle: cheap, since every trainer of a local testnet shares this machine. */
  joinPowBits: 8,
  /** Long enough for a tiny-preset run of the default steps on two cores. */
  timeoutSeconds: 1800,
  seed: 1,
  roundWitnessTime: 1,
} as const;
