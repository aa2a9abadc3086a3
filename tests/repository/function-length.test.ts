// A reader can hold each function of src/ in their head: none is over MAX_LINES lines. A function is every
// function-like node with a body (declarations, expressions, arrows, methods, accessors, constructors), counted
// from the line of its first token to the line of its closing brace, nested functions included in their parent.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const MAX_LINES = 80;

interface Measured {
  readonly where: string;
  readonly name: string;
  readonly lines: number;
}

function nameOf(node: ts.SignatureDeclaration): string {
  if (node.name !== undefined) return node.name.getText();
  const { parent } = node;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText();
  return "(anonymous)";
}

/** Every function of one source text, with its length in lines. */
function functionsOf(file: string, text: string): Measured[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Measured[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.end).line;
      found.push({ where: `${file}:${first + 1}`, name: nameOf(node), lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function sources(): string[] {
  const out = execFileSync("git", ["ls-files", "-z", "src"], { cwd: root, encoding: "utf8" });
  return out.split("\0").filter((f) => f.endsWith(".ts"));
}

describe("function length in src/", () => {
  it("measures a function from its first line to its closing brace, arrows and methods included", () => {
    const text = ["export function outer() {", "  const inner = () => {", "    return 1;", "  };", "  return { m() { return inner(); } };", "}"].join("\n");
    assert.deepEqual(
      functionsOf("x.ts", text).map((f) => [f.name, f.lines]),
      [
        ["outer", 6],
        ["inner", 3],
        ["m", 1],
      ],
    );
  });

  it(`has no function over ${MAX_LINES} lines`, () => {
    const files = sources();
    assert.ok(files.includes("src/domain/pool.ts"), "git ls-files listed the sources");
    const long = files.flatMap((f) => functionsOf(f, readFileSync(join(root, f), "utf8"))).filter((f) => f.lines > MAX_LINES);
    assert.deepEqual(
      long.map((f) => `${f.where} ${f.name}: ${f.lines} lines`),
      [],
    );
  });
});
