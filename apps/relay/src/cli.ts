import { CORE } from '@meshtrain/core';
console.log('relay', CORE, process.argv.slice(2));
