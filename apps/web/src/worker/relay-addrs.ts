// Which libp2p addresses of the relay a page can dial (pure: no libp2p import, unit-tested in Node).
/**
 * The relay's libp2p addresses as this page can dial them. The relay announces its own view (host, port,
 * plain `/ws`); a page loaded over https behind a TLS proxy can only open `wss:` to the origin it came from,
 * and the relay serves libp2p on the same port as HTTP (a `GET /` WebSocket upgrade). So the origin's address
 * with the relay's PeerId comes first, then the announced ones.
 */
export function pageRelayAddrs(relayUrl: string, announced: readonly string[]): string[] {
  const ids = [...new Set(announced.map((a) => /\/p2p\/([^/]+)$/.exec(a)?.[1]).filter((x) => !!x))];
  let origin: URL;
  try {
    origin = new URL(relayUrl);
  } catch {
    return [...announced];
  }
  const secure = origin.protocol === 'https:';
  const port = origin.port !== '' ? origin.port : secure ? '443' : '80';
  // "localhost" is loopback: dial it as an address, not a name libp2p may try to resolve.
  const host = origin.hostname === 'localhost' ? '127.0.0.1' : origin.hostname.replace(/^\[|\]$/g, '');
  const proto = /^\d+\.\d+\.\d+\.\d+$/.test(host) ? 'ip4' : host.includes(':') ? 'ip6' : 'dns';
  const fromOrigin = ids.map((id) => `/${proto}/${host}/tcp/${port}/${secure ? 'tls/ws' : 'ws'}/p2p/${id}`);
  return [...new Set([...fromOrigin, ...announced])];
}
