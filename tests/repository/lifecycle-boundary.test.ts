// A machine's lifecycle is decided in one module: no other file of the domain reads its plan, its command in flight
// or plugpool's power-on record directly; they ask lifecycle.ts, which derives every phase and the Instance CA sees.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const domain = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "src", "domain");
const DIRECT = /plan\.kind|jobOf\(|power\.command|poweredByPlugpool/;

describe("the lifecycle module", () => {
  it("is the only file of the domain that reads a machine's plan, its command in flight or the power-on record directly", () => {
    const outside = readdirSync(domain)
      .filter((file) => file.endsWith(".ts") && file !== "lifecycle.ts")
      .flatMap((file) =>
        readFileSync(join(domain, file), "utf8")
          .split("\n")
          .flatMap((line, i) => (DIRECT.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
      );
    assert.deepEqual(outside, []);
    assert.match(readFileSync(join(domain, "lifecycle.ts"), "utf8"), DIRECT, "the pattern still finds what it looks for");
  });
});
