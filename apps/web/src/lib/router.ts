// Client-side routes: `/` volunteer page, `/runs/:id` run dashboard, `/admin` admin console. The relay serves
// index.html for each of these paths, so a reload or a shared link lands on the same page.
import { readable } from 'svelte/store';
import { parseRoute } from './routes.ts';
import type { Route } from './routes.ts';

export { parseRoute };
export type { Route };

let notify: ((r: Route) => void) | undefined;

/** The current route; changes on navigate() and on the browser's back/forward. */
export const route = readable<Route>(parseRoute(location.pathname), (set) => {
  notify = set;
  const onPop = () => set(parseRoute(location.pathname));
  addEventListener('popstate', onPop);
  return () => {
    notify = undefined;
    removeEventListener('popstate', onPop);
  };
});

export function navigate(path: string): void {
  if (path === location.pathname) return;
  history.pushState(null, '', path);
  notify?.(parseRoute(location.pathname));
  scrollTo(0, 0);
}

export function runPath(runId: string): string {
  return `/runs/${encodeURIComponent(runId)}`;
}

/** Click handler for same-origin links: navigates without a page load (modifier clicks open normally). */
export function linkClick(event: MouseEvent): void {
  const a = (event.currentTarget as HTMLElement | null)?.closest('a');
  if (!a || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(a.href);
  if (url.origin !== location.origin) return;
  event.preventDefault();
  navigate(url.pathname);
}
