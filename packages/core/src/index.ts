export const CORE = 'core' as const;
