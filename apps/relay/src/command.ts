// The contract between the meshtrain-relay dispatcher and one subcommand module in ./commands/.
export interface Command {
  /** One line for `meshtrain-relay --help`. */
  summary: string;
  /** Arguments after the command name, e.g. `FILE [--json]`. */
  usage: string;
  /** Runs the command; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** Exit status for usage errors and unreadable inputs; 1 is kept for "the input is invalid". */
export const EXIT_USAGE = 2;

/** An error the user can fix (bad flag, missing file): printed as one line, without a stack trace. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = EXIT_USAGE) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}
