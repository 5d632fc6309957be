export type { Command } from './command.ts';
