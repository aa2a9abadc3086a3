// `npm run bundle`: plugpool and its runtime dependencies as one ES module, dist/plugpool.mjs, which the container
// image runs. Loaded as some 3,000 modules (most of them @kubernetes/client-node's API classes and models, which
// its KubeConfig pulls in whole), plugpool starts at about 115 MB resident with a 34 MB live heap; as one module
// it starts at about 90 MB with 14 MB. Whitespace and syntax are minified but names are kept, so stack traces
// still name functions.
//
//   node scripts/bundle.ts [OUTFILE]    (default dist/plugpool.mjs)
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
  logLevel: "warning",
});

// V8 keeps a script's source for lazy compilation, as Latin-1 when every character fits and as UTF-16 otherwise:
// one character above U+00FF (esbuild escapes those in strings, not in regular expressions) doubles the bundle's
// share of the heap, some 4 MB.
const source = readFileSync(outfile, "utf8");
const wide = /[^\u0000-\u00FF]/u.exec(source);
if (wide !== null) {
  const at = wide.index;
  throw new Error(
    `${outfile}: U+${(wide[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")} at offset ${at} ` +
      `(${JSON.stringify(source.slice(Math.max(0, at - 60), at + 20))}) would double the bundle in memory; escape it in the source (\\uXXXX)`,
  );
}
