// The tab's coordinator link, counting the results it downloads from the relay's HTTP API: the fallback path
// when no peer delivered a result, and so the relay's share of the result bytes this tab fetched (the page
// shows it beside the bytes that came from peers directly and through the relay's circuit).
import { RelayLink } from '@meshtrain/client';

export class CountingRelayLink extends RelayLink {
  /** Results (SignedResult frames) fetched from the relay's HTTP result route, and their bytes. */
  results = 0;
  resultBytes = 0;

  override async fetchResult(commitment: Uint8Array): Promise<Uint8Array | null> {
    const frame = await super.fetchResult(commitment);
    if (frame) {
      this.results++;
      this.resultBytes += frame.length;
    }
    return frame;
  }
}
