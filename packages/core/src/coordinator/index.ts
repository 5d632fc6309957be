export * from './config.ts';
