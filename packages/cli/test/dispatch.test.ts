// The shared CLI dispatcher on a folder of two fixture commands: help, usage errors, exit codes.
import { describe, expect, it } from 'vitest';
import { dispatch } from '../src/index.ts';

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await dispatch(
    {
      program: 'prog',
      commandsDir: new URL('./fixtures/commands/', import.meta.url),
      stdout: (t) => (out += `${t}\n`),
      stderr: (t) => (err += `${t}\n`),
    },
    argv,
  );
  return { code, out, err };
}

describe('dispatch', () => {
  it('lists the commands on --help (stdout, 0) and without arguments (stderr, 2)', async () => {
    for (const flag of ['--help', '-h', 'help']) {
      const r = await cli(flag);
      expect(r.code).toBe(0);
      expect(r.out).toMatch(
        /^usage: prog <command> \[options\]\n\ncommands:\n {2}echo +exits with the number after --exit\n {2}fail +fails\n/,
      );
      expect(r.err).toBe('');
    }
    const bare = await cli();
    expect(bare.code).toBe(2);
    expect(bare.out).toBe('');
    expect(bare.err).toMatch(/^usage: prog <command>/);
  });

  it('refuses an unknown command with exit 2 and the usage', async () => {
    const r = await cli('nope', '--x');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^prog: unknown command 'nope'\n\nusage: prog <command>/);
  });

  it("prints a command's usage on --help without running it", async () => {
    const r = await cli('echo', 'a', '--help');
    expect(r.code).toBe(0);
    expect(r.out).toBe('usage: prog echo [ARGS…] [--exit N]\n\nexits with the number after --exit\n');
  });

  it("returns the command's exit code", async () => {
    expect((await cli('echo', 'a', 'b')).code).toBe(0);
    expect((await cli('echo', '--exit', '3')).code).toBe(3);
  });

  it('prints a CliError as one line with its exit code, any other error with its stack and exit 1', async () => {
    const usage = await cli('fail', '--usage');
    expect(usage).toMatchObject({ code: 2, err: 'prog: --usage given\n' });
    const invalid = await cli('fail', '--invalid');
    expect(invalid).toMatchObject({ code: 1, err: 'prog: the input is invalid\n' });
    const bug = await cli('fail');
    expect(bug.code).toBe(1);
    expect(bug.err).toMatch(/^prog: a bug\nTypeError: a bug\n\s+at /);
  });
});
