export * from './adamw.ts';
