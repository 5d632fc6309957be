// The contract between the dispatcher and a meshtrain-relay subcommand: @meshtrain/cli's, shared with
// node-trainer. EXIT_USAGE (2) is for usage errors and unreadable inputs; 1 is kept for "the input is invalid".
export { CliError, EXIT_USAGE, type Command } from '@meshtrain/cli';
