// node-datachannel, the native WebRTC stack under @libp2p/webrtc in Node, keeps threads and callbacks into
// JavaScript that hold the event loop open after a stopped libp2p node closed every connection: a process
// that is otherwise done never exits. They are invisible to process.getActiveResourcesInfo() and a GC does
// not free them; node-datachannel's process-wide cleanup() does. Because cleanup() closes every peer
// connection of the process, it runs only once the last Node libp2p node of the process stopped.
import { createRequire } from 'node:module';

let live = 0;

/** Counts one more Node libp2p node; the returned release (idempotent) runs cleanup() after the last one. */
export function holdNativeWebRTC(): () => void {
  live++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    live--;
    if (live === 0) nativeWebRTC().cleanup();
  };
}

/** The node-datachannel copy @libp2p/webrtc loaded (resolved from it, so never a second copy). */
function nativeWebRTC(): { cleanup(): void } {
  const webrtc = createRequire(import.meta.url).resolve('@libp2p/webrtc');
  return createRequire(webrtc)('node-datachannel') as { cleanup(): void };
}
