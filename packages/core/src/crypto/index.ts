// Crypto primitives for meshtrain: bytes/hex helpers, SHA-256, Ed25519 identities and signatures, signed relay
// requests.
export * from './errors.ts';
export * from './bytes.ts';
export * from './hash.ts';
export * from './ed25519.ts';
export * from './signed-requests.ts';
export * from './join-pow.ts';
