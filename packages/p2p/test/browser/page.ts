// Test page: runs the browser-peer scenarios on the page's main thread (index.html) or, with `?worker`, in a
// dedicated module worker as the web app does (the page then only forwards each call to the worker).
import { registerScenarios } from '../../../../e2e/lib/page-runtime.ts';
import type { Scenario } from '../../../../e2e/lib/page-runtime.ts';
import { scenarios } from './scenarios.ts';
import type { WorkerReply, WorkerRequest } from './protocol.ts';

const status = document.getElementById('status') as HTMLElement;

if (new URLSearchParams(location.search).has('worker')) {
  const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let next = 0;
  worker.onmessage = (ev: MessageEvent<WorkerReply>) => {
    const p = pending.get(ev.data.id);
    pending.delete(ev.data.id);
    if (ev.data.ok) p?.resolve(ev.data.value);
    else p?.reject(new Error(`in the worker: ${ev.data.error}`));
  };
  worker.onerror = (ev) => {
    for (const p of pending.values()) p.reject(new Error(`worker error: ${ev.message}`));
    pending.clear();
  };
  const forward =
    (name: string): Scenario =>
    async (args: never) =>
      await new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject });
        worker.postMessage({ id, name, args } satisfies WorkerRequest);
      });
  registerScenarios(Object.fromEntries(Object.keys(scenarios).map((name) => [name, forward(name)])));
  status.textContent = 'ready (worker)';
} else {
  registerScenarios(scenarios as unknown as Record<string, Scenario>);
  status.textContent = 'ready';
}
