// apps/relay: the coordinator service. The server lands in a later issue; for now the CLI contract is public.
export type { Command } from './command.ts';
