// Turns schema-validation errors into "<path>: <what is wrong and what is expected>" lines.
import type { ErrorObject } from "ajv/dist/2020.js";
import { SYNTAX_FORMATS } from "./formats.ts";
import { formatPath, type SectionPath } from "../../adapters/power-backend.ts";

export { formatPath };

/** A location in the configuration: keys and list indexes from the top. */
export type ConfigPath = SectionPath;

/** One problem of the file: where, and what is wrong and what is expected. */
export interface ConfigIssue {
  readonly path: ConfigPath;
  readonly message: string;
}

/** `/nodeGroups/0/nodes/2` → `["nodeGroups", 0, "nodes", 2]`, telling list indexes from keys by the data. */
export function pointerToPath(pointer: string, root: unknown): ConfigPath {
  const path: (string | number)[] = [];
  let node = root;
  for (const escaped of pointer.split("/").slice(1)) {
    const key = escaped.replaceAll("~1", "/").replaceAll("~0", "~");
    path.push(Array.isArray(node) ? Number(key) : key);
    node = childOf(node, key);
  }
  return path;
}

export function childOf(node: unknown, key: string | number): unknown {
  if (typeof node !== "object" || node === null || !Object.hasOwn(node, key)) return undefined;
  return (node as Record<string | number, unknown>)[key];
}

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: "a string",
  number: "a number",
  integer: "a whole number",
  boolean: "true or false",
  object: "a mapping",
  array: "a list",
  null: "empty",
};

function kindOf(value: unknown): string {
  if (value === null || value === undefined) return "nothing";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  if (typeof value === "number") return Number.isInteger(value) ? "a whole number" : "a number";
  return TYPE_NAMES[typeof value] ?? typeof value;
}

/** One schema error as an issue. Values from the file are not repeated, except numbers. */
export function describeSchemaError(error: ErrorObject, root: unknown): ConfigIssue {
  const path = pointerToPath(error.instancePath, root);
  const params = error.params as Record<string, unknown>;
  const at = (message: string, where: ConfigPath = path): ConfigIssue => ({ path: where, message });
  if (error.propertyName !== undefined) {
    // An error inside `propertyNames`: the key itself is wrong.
    return at(`the key ${SYNTAX_FORMATS[String(params.format)]?.expected ?? String(error.message)}`, [...path, error.propertyName]);
  }
  switch (error.keyword) {
    case "additionalProperties": {
      const key = String(params.additionalProperty);
      const known = Object.keys((error.parentSchema?.properties ?? {}) as object);
      return at(`unknown key ${suggest(key, known)}`, [...path, key]);
    }
    case "required":
      return at("is required", [...path, String(params.missingProperty)]);
    case "type": {
      const expected = [params.type].flat().map((t) => TYPE_NAMES[String(t)] ?? String(t));
      return at(`must be ${expected.join(" or ")}, not ${kindOf(error.data)}`);
    }
    case "format":
      return at(SYNTAX_FORMATS[String(params.format)]?.expected ?? String(error.message));
    case "minimum":
      return params.limit === 0
        ? at(`must not be negative (found ${String(error.data)})`)
        : at(`must be at least ${String(params.limit)} (found ${String(error.data)})`);
    case "minItems":
      return at(params.limit === 1 ? "must list at least one entry" : `must list at least ${String(params.limit)} entries`);
    case "minLength":
      return at("must not be empty");
    case "enum":
      return at(`must be one of ${[params.allowedValues].flat().map(String).join(", ")}`);
    case "uniqueItems":
      // ajv reports the first duplicate pair only: j is the later entry, i the earlier one.
      return at(`is the same as ${formatPath([...path, Number(params.i)])}; list each value once`, [...path, Number(params.j)]);
    default:
      return at(String(error.message));
  }
}

/** "(did you mean powerOff?)" for a near miss, else the keys allowed there. */
export function suggest(key: string, known: readonly string[]): string {
  const loose = (s: string) => s.toLowerCase().replace(/[-_]/g, "");
  const startsWith = (long: string, short: string) => short.length >= 4 && loose(long).startsWith(loose(short));
  const near = known.find((k) => loose(k) === loose(key)) ??
    known.find((k) => startsWith(key, k) || startsWith(k, key)) ??
    known
      .map((k) => ({ k, d: editDistance(key.toLowerCase(), k.toLowerCase()) }))
      .filter(({ d }) => d <= Math.max(1, Math.floor(key.length / 3)))
      .sort((a, b) => a.d - b.d)[0]?.k;
  if (near !== undefined) return `(did you mean ${near}?)`;
  return `(expected one of ${known.join(", ")})`;
}

/** Levenshtein distance; keys are short, so the plain O(n·m) table is fine. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
