// Runs inside a test namespace (e2e/lib/netns.ts, started as `ip netns exec NS node netns-forward.ts PORT SOCK`):
// listens on 127.0.0.1:PORT there and splices every connection to the Unix socket SOCK, which the test process
// serves on the host side. Prints "ready" once listening; exits on SIGTERM.
import { connect, createServer } from 'node:net';

const port = Number(process.argv[2]);
const path = String(process.argv[3]);

const server = createServer((down) => {
  const up = connect(path);
  const close = () => {
    down.destroy();
    up.destroy();
  };
  down.on('error', close);
  up.on('error', close);
  down.pipe(up).pipe(down);
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => process.exit(0));
