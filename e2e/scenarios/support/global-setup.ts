// vitest global setup for e2e/scenarios: the relay serves apps/web/dist, so build it first when needed.
import { ensureWebBuild } from './web-build.ts';

export default async function setup(): Promise<void> {
  const t0 = Date.now();
  const built = await ensureWebBuild(process.env.MESHTRAIN_E2E_REBUILD === '1');
  console.log(built ? `e2e: built apps/web in ${Date.now() - t0} ms` : 'e2e: apps/web/dist is up to date');
}
