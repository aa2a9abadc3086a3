// A reader of the repository has only the repository: no comment or document may send them to a file that is
// not in it. Upstream facts cite their upstream source by URL instead.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const self = "tests/repository/comments.test.ts";

/** References to documents that live outside the repository: a specification's sections, research notes. */
const OUTSIDE = [/\bSPEC\b\s*§/, /\breference\/[\w-]+\.md\b/, /\.\.\/shared\/(?!vendor\/)/];

function trackedTextFiles(): string[] {
  const out = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" });
  return out
    .split("\0")
    .filter((f) => f !== "" && f !== self && !f.startsWith("gen/") && /\.(ts|js|json|ya?ml|md|sh|proto)$|Containerfile$/.test(f));
}

describe("references in the repository", () => {
  it("finds the repository's files to check", () => {
    const files = trackedTextFiles();
    assert.ok(files.includes("src/domain/pool.ts") && files.includes("README.md"), "git ls-files listed the sources");
  });

  it("name no document outside the repository", () => {
    const found: string[] = [];
    for (const file of trackedTextFiles()) {
      const lines = readFileSync(join(root, file), "utf8").split("\n");
      lines.forEach((line, i) => {
        if (OUTSIDE.some((p) => p.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(found, []);
  });
});
