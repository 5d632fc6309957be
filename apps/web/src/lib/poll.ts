// Polls a loader every `intervalMs` while subscribed and exposes {data, error, loading} as a store. The
// relay has no push channel for dashboards (its WebSocket is the client protocol), so pages poll its JSON.
import { readable } from 'svelte/store';
import type { Readable } from 'svelte/store';

export interface Polled<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  updatedAt: number | null;
}

export interface PollStore<T> extends Readable<Polled<T>> {
  /** Load now (e.g. after an admin action) instead of waiting for the next tick. */
  refresh(): void;
}

export function poll<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number): PollStore<T> {
  let kick: (() => void) | undefined;
  const store = readable<Polled<T>>(
    { data: null, error: null, loading: true, updatedAt: null },
    (set, update) => {
      let stopped = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let controller: AbortController | undefined;
      const tick = async () => {
        clearTimeout(timer);
        controller?.abort();
        const c = new AbortController();
        controller = c;
        try {
          const data = await load(c.signal);
          if (!stopped && !c.signal.aborted)
            set({ data, error: null, loading: false, updatedAt: Date.now() });
        } catch (e) {
          if (stopped || c.signal.aborted) return;
          update((s) => ({ ...s, error: e instanceof Error ? e.message : String(e), loading: false }));
        }
        if (!stopped && controller === c) timer = setTimeout(() => void tick(), intervalMs);
      };
      kick = () => void tick();
      void tick();
      return () => {
        stopped = true;
        kick = undefined;
        clearTimeout(timer);
        controller?.abort();
      };
    },
  );
  return { subscribe: store.subscribe, refresh: () => kick?.() };
}
