// @meshtrain/client/testing: test doubles that are real protocol code, for tests, benchmarks and simulations
// — not part of what a shell ships. LocalHub is an in-process coordinator host (core's rules and tick behind
// CoordinatorLinks, virtual time); adversary() wraps an honest client's parts into an attack simulation;
// Collusion drives many model-less identities of one attacker.
export * from './testing/local-hub.ts';
export * from './testing/adversary.ts';
export * from './testing/collusion.ts';
