console.error('meshtrain-relay: no commands yet'); process.exitCode = 2;
