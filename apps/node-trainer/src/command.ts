// The contract between the dispatcher and a node-trainer subcommand: @meshtrain/cli's, shared with
// meshtrain-relay.
export { CliError, EXIT_USAGE, type Command } from '@meshtrain/cli';
