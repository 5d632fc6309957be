// `npm start`: the main job on the embedded default run. The relay lands with the network issue; until then this
// says so plainly instead of pretending.
console.log(
  [
    'meshtrain: `npm start` is not available yet.',
    'It will start the relay with the embedded default run (tiny preset, Brown corpus), one local node-trainer,',
    'and print the volunteer URL. The relay and trainer land with the network issue (#5).',
    'What works today: `npx meshtrain-relay validate-config FILE` and `npm test`.',
  ].join('\n'),
);
