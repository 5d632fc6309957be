// /metrics: a minimal Prometheus registry and meshtrain's metric set.
export { MetricsRegistry, Counter, Gauge, escapeHelp, escapeLabelValue, formatValue } from './registry.ts';
export type { Labels } from './registry.ts';
export { RelayMetrics, metricsRoutes, CLIENT_STATES } from './relay-metrics.ts';
