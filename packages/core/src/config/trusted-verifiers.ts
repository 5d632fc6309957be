// Editing a run config's `[config] trusted_verifiers` list in its TOML text (docs/protocol.md "Trust: anchors,
// verified history and probation"), keeping the rest of the text — comments included — as it was: how the relay
// lists its host's verifier in the embedded default run, and how the admin console sets the list.

const COMMENT =
  '# Verifiers the run creator trusts (docs/protocol.md "Trust: anchors, verified history and probation").';
const LINE = /^trusted_verifiers[ \t]*=[^\n]*\n?/m;

/**
 * `toml` with `trusted_verifiers = [keys…]` as the first key of its `[config]` table. `toml` must have a
 * `[config]` table header on a line of its own and no trusted_verifiers key yet; an empty list changes
 * nothing.
 */
export function withTrustedVerifiers(toml: string, keys: readonly string[]): string {
  if (keys.length === 0) return toml;
  const at = toml.search(/^\[config\][ \t]*$/m);
  if (at < 0) throw new Error('the run config has no [config] table to list trusted verifiers in');
  const nl = toml.indexOf('\n', at);
  const end = nl < 0 ? toml.length : nl + 1;
  const line = `${COMMENT}\ntrusted_verifiers = [${keys.map((k) => JSON.stringify(k)).join(', ')}]\n`;
  return toml.slice(0, end) + (nl < 0 ? '\n' : '') + line + toml.slice(end);
}

/**
 * `toml` with its trusted_verifiers list replaced by `keys` (removed when empty). The key must sit on one line
 * (as withTrustedVerifiers and TOML writers put it); its comment line, when it is ours, goes with it.
 */
export function setTrustedVerifiers(toml: string, keys: readonly string[]): string {
  const without = toml.replace(`${COMMENT}\n`, '').replace(LINE, '');
  return withTrustedVerifiers(without, keys);
}
