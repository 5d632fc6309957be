export * from './bloom-data.ts';
