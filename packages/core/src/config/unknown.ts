// Keys that failed their own check (wrong type, missing, out of the schema's range) are *unknown* to the rules
// that relate keys to each other. So that one pass reports every error of a file, those rules still run on the
// keys that did parse, and a rule that needs an unknown value is skipped: its verdict would only be a knock-on
// of an error already reported.
//
// An unknown value is a stand-in that cannot be read: reading one of its keys gives another unknown value (the
// keys of a table that failed are unknown too), while comparing it, computing with it, formatting it or asking
// which keys it has throws UnknownValue, which `whenKnown` and `knownOr` catch around one rule or derivation.
// Presence tests (`=== undefined`, `??`) do not throw: an unknown value was given, just not validly.

class UnknownValue extends Error {
  constructor() {
    super('a rule read a config value that failed its own check');
    this.name = 'UnknownValue';
  }
}

const unreadable = (): never => {
  throw new UnknownValue();
};

// The target is an empty null-prototype object; every trap that would reveal a value or a key set throws, and
// the proxy cannot be changed, so no code can mistake it for data.
const UNKNOWN: object = new Proxy(Object.create(null) as object, {
  get: (_target, key) =>
    typeof key === 'symbol' || key === 'valueOf' || key === 'toString' || key === 'toJSON'
      ? unreadable()
      : UNKNOWN,
  has: unreadable,
  ownKeys: unreadable,
  getOwnPropertyDescriptor: unreadable,
  set: unreadable,
  defineProperty: unreadable,
  deleteProperty: unreadable,
});

/** The unknown stand-in, typed as whatever slot it fills. */
export function unknownValue<T>(): T {
  return UNKNOWN as T;
}

/** Runs `fn`; if it touched an unknown value, does nothing more (the rule is skipped). */
export function whenKnown(fn: () => void): void {
  knownOr(fn);
}

/** `fn()`, or the unknown stand-in when `fn` needs an unknown value (a derived value is unknown too). */
export function knownOr<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof UnknownValue) return unknownValue<T>();
    throw err;
  }
}

/**
 * A copy of the parsed TOML document with the value at each of `paths` replaced by the unknown stand-in. Only
 * the tables along those paths are copied; `doc` is left as it was (its values still explain the errors).
 */
export function withUnknownsAt(doc: unknown, paths: readonly (readonly PropertyKey[])[]): unknown {
  let out = doc;
  for (const path of paths) out = replaceAt(out, path);
  return out;
}

function replaceAt(node: unknown, path: readonly PropertyKey[]): unknown {
  if (path.length === 0 || node === UNKNOWN) return UNKNOWN;
  // A path through a value that is not a table: that value is what failed.
  if (node === null || typeof node !== 'object') return UNKNOWN;
  const [key, ...rest] = path as [PropertyKey, ...PropertyKey[]];
  const copy = (Array.isArray(node) ? [...node] : { ...node }) as Record<PropertyKey, unknown>;
  copy[key] = replaceAt(copy[key], rest);
  return copy;
}
