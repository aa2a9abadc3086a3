// `npm run bundle`: plugpool and its runtime dependencies as one ES module, dist/plugpool.mjs, which the container
// image runs. Loaded as some 3,000 modules (most of them @kubernetes/client-node's API classes and models, which
// its KubeConfig pulls in whole), plugpool starts at about 115 MB resident with a 34 MB live heap; as one module
// it starts at about 90 MB with 14 MB. Whitespace and syntax are minified but names are kept, so stack traces
// still name functions. Dependencies are bundled as published: nothing of theirs is rewritten.
//
//   node scripts/bundle.ts [OUTFILE]    (default dist/plugpool.mjs)
import { isAscii } from "node:buffer";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const root = join(import.meta.dirname, "..");
const outfile = process.argv[2] ?? join(root, "dist", "plugpool.mjs");

await build({
  entryPoints: [join(root, "src", "app", "main.ts")],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node22.19",
  minifyWhitespace: true,
  minifySyntax: true,
  // CommonJS dependencies (ajv, winston, …) require Node's built-ins; an ES module has no `require` of its own.
  banner: { js: 'import { createRequire as __plugpoolRequire } from "node:module"; const require = __plugpoolRequire(import.meta.url);' },
  // Dependencies' license notices go beside the bundle (plugpool.mjs.LEGAL.txt, shipped with it) rather than
  // at its end: they hold names outside ASCII, which the check below refuses.
  legalComments: "external",
  logLevel: "warning",
});

// V8 keeps a script's source for lazy compilation, and Node hands it one byte per character only when the file
// is all ASCII, two otherwise: one other character (esbuild escapes them in strings, not in regular expressions
// or comments) costs some 4 MB of memory.
const bytes = readFileSync(outfile);
if (!isAscii(bytes)) {
  const at = bytes.findIndex((b) => b > 0x7f);
  const around = bytes.subarray(Math.max(0, at - 60), at + 20).toString("utf8");
  throw new Error(`${outfile}: a character outside ASCII at byte ${at} (${JSON.stringify(around)}) would double the bundle in memory; escape it in the source (\\uXXXX)`);
}
