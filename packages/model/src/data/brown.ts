// The Brown corpus (Francis & Kučera), "form C": every token is `word/tag` (e.g. `The/at Fulton/np-tl`),
// punctuation is tokenised apart (`,/,`, ``` ``/`` ``` for an opening double quote, `''/''` for a closing one),
// a paragraph starts with a tab-indented line, each further line of it is one sentence, and paragraphs are
// separated by blank lines. stripBrownTags turns that back into plain running text: tags removed, quotes
// restored, punctuation attached to its word, one paragraph per line.

/** Tokens written flush against the previous word. */
const ATTACH_LEFT = new Set([',', '.', ';', ':', '?', '!', ')', ']', "''", "'", '%']);
/** Tokens the next word is written flush against. */
const ATTACH_RIGHT = new Set(['``', '(', '[', '$']);

/** Splits `word/tag` at its last slash (words may contain slashes: `1-1/2/cd`, `//in`). */
function wordOf(token: string): string {
  const slash = token.lastIndexOf('/');
  return slash > 0 ? token.slice(0, slash) : token;
}

function detokenize(words: readonly string[]): string {
  let out = '';
  let glueNext = true;
  for (const w of words) {
    const text = w === '``' || w === "''" ? '"' : w;
    if (!glueNext && !ATTACH_LEFT.has(w)) out += ' ';
    out += text;
    glueNext = ATTACH_RIGHT.has(w);
  }
  return out;
}

/** Plain text of one tagged sentence line. */
function sentence(line: string): string[] {
  const words = line.trim().split(/\s+/).filter(Boolean).map(wordOf);
  // Form C repeats a sentence-ending semicolon (`... appetite/nn ;/. ;/.`); keep one.
  const out: string[] = [];
  for (const w of words) if (!(w === ';' && out[out.length - 1] === ';')) out.push(w);
  return out;
}

/**
 * Converts one Brown form-C file (a document) to plain text: paragraphs joined by "\n", sentences of a
 * paragraph joined by a space, no trailing newline.
 */
export function stripBrownTags(tagged: string): string {
  const paragraphs: string[] = [];
  let current: string[] = [];
  const flush = () => {
    if (current.length > 0) paragraphs.push(detokenize(current));
    current = [];
  };
  for (const line of tagged.split(/\r?\n/)) {
    if (line.trim() === '') {
      flush();
      continue;
    }
    // A headline (every tag ends in -hl, e.g. `Thirty-three/cd-hl`) is its own paragraph even when the
    // text after it is not indented.
    const tokens = line.trim().split(/\s+/);
    const headline = tokens.every((t) => /-hl$/.test(t));
    if (line.startsWith('\t') || headline) flush();
    current.push(...sentence(line));
    if (headline) flush();
  }
  flush();
  return paragraphs.join('\n');
}

/** Brown document ids: `c` + genre letter a–r + two digits (the package's file names). */
export const BROWN_DOCUMENT_ID = /^c[a-r]\d\d$/;
