// The contract between the node-trainer dispatcher and one subcommand module.
export interface Command {
  /** One line for `node-trainer --help`. */
  summary: string;
  /** Options after the command name, e.g. `--preset P --seed S --out DIR`. */
  usage: string;
  /** Runs the command; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** An error the user can fix (bad flag, missing file): printed without a stack trace. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 2) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}
