// plugpool compiled as the container image runs it (tsc -p tsconfig.build.json), into a folder of the bench's
// own so that the repository's dist/ is left alone.
import { execFileSync } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");

/** Compiles src/ and gen/ into `outDir`; returns the path of main.js. Throws with tsc's output on errors. */
export function buildPlugpool(outDir: string): string {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json"), "--outDir", outDir, "--declaration", "false", "--sourceMap", "false"], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    const output = (error as { stdout?: Buffer }).stdout?.toString() ?? "";
    throw new Error(`compiling plugpool failed:\n${output}`, { cause: error });
  }
  return join(outDir, "src", "app", "main.js");
}
