import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createLogger, parseLogLevel } from "../../src/app/logger.ts";

const logger = new URL("../../src/app/logger.ts", import.meta.url).href;

/** What a logger at `level` writes to stdout for one line at each level. */
function logged(level: string): string[] {
  const script = `import { createLogger } from ${JSON.stringify(logger)};
const log = createLogger({ level: ${JSON.stringify(level)} });
for (const l of ["debug", "info", "warn", "error"]) log[l]("at " + l);`;
  const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout.trim().split("\n").filter(Boolean).map((line) => (JSON.parse(line) as { level: string }).level);
}

describe("the logger", () => {
  it("reads a level in any letter case", () => {
    assert.equal(parseLogLevel("INFO"), "info");
    assert.equal(parseLogLevel("Debug"), "debug");
    assert.equal(parseLogLevel("bogus"), undefined);
    assert.equal(parseLogLevel("verbose"), undefined);
    assert.equal(parseLogLevel(""), undefined);
  });

  it("logs at and above the level it was given, whatever its letter case", () => {
    assert.deepEqual(logged("INFO"), ["info", "warn", "error"]);
    assert.deepEqual(logged("debug"), ["debug", "info", "warn", "error"]);
    assert.deepEqual(logged("error"), ["error"]);
  });

  it("refuses an unknown level instead of logging nothing", () => {
    assert.throws(() => createLogger({ level: "bogus" }), /unknown log level "bogus"/);
  });
});
