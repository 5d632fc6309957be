// node-trainer show-identity: print (creating on first use) this trainer's public key and libp2p PeerId.
import { CliError, type Command } from '../command.ts';
import { defaultIdentityPath, IdentityError, loadOrCreateIdentity } from '../identity/index.ts';
import { parseFlags } from '../options/index.ts';

const command: Command = {
  summary: "print this trainer's identity (public key and PeerId), creating it on first use",
  usage: `[--identity FILE] [--json]\n\n  --identity FILE  key file (default ${defaultIdentityPath()}, created with mode 0600)\n  --json           one JSON object`,
  async run(argv) {
    const { values } = parseFlags(argv, { identity: { type: 'string' }, json: { type: 'boolean' } });
    let id;
    try {
      id = await loadOrCreateIdentity(values.identity ?? defaultIdentityPath());
    } catch (e) {
      if (e instanceof IdentityError) throw new CliError(e.message);
      throw e;
    }
    if (values.json)
      console.log(
        JSON.stringify({ public_key: id.id, peer_id: id.peerId, path: id.path, created: id.created }),
      );
    else {
      if (id.created)
        console.error(`created a new identity in ${id.path} (keep it private: it is your trainer's key)`);
      console.log(`public key  ${id.id}`);
      console.log(`peer id     ${id.peerId}`);
      console.log(`key file    ${id.path}`);
    }
    return 0;
  },
};

export default command;
