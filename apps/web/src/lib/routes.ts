// The app's routes as data (no DOM access, so it is testable in Node).
export type Route =
  | { page: 'volunteer' }
  | { page: 'run'; runId: string }
  | { page: 'admin' }
  | { page: 'not-found'; path: string };

export function parseRoute(pathname: string): Route {
  const path = pathname.replace(/\/+$/, '') || '/';
  if (path === '/') return { page: 'volunteer' };
  if (path === '/admin') return { page: 'admin' };
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run?.[1] !== undefined) {
    try {
      return { page: 'run', runId: decodeURIComponent(run[1]) };
    } catch {
      return { page: 'not-found', path }; // malformed percent-encoding
    }
  }
  return { page: 'not-found', path };
}
