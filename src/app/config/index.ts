// Loads plugpool's configuration: YAML → JSON Schema (schema.json: the shape, defaults applied) → one pass that
// parses each value and checks what the schema cannot → typed, deeply frozen AppConfig. Every problem is
// reported at once, by path, in file order.
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject } from "ajv/dist/2020.js";
import { isNode, LineCounter, parseDocument, visit, type Document, type ErrorCode } from "yaml";
import type { AppConfig } from "./app-config.ts";
import { buildConfig } from "./build.ts";
import { checkConfig } from "./checks.ts";
import { PARSED_FORMATS, SYNTAX_FORMATS } from "./formats.ts";
import { describeSchemaError, formatPath, type ConfigIssue, type ConfigPath } from "./issues.ts";
import { CONFIG_SCHEMA } from "./schema.ts";
import { whyUnreadable } from "./checks.ts";
import { messageOf } from "../../domain/errors.ts";

export type { AppConfig } from "./app-config.ts";

/** The configuration cannot be used. `message` lists every issue, one per line, and never holds a credential. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  /** Each as "<path>: <what is wrong and what is expected>". */
  readonly issues: readonly string[];

  constructor(issues: readonly string[]) {
    // Belt and braces: no issue is built from a URL's text, but should one ever be, its userinfo goes.
    const safe = Object.freeze(issues.map((issue) => issue.replace(/\/\/[^\s/@]*@/g, "//[redacted]@")));
    super(safe.join("\n"));
    this.issues = safe;
  }
}

let validator: ReturnType<Ajv2020["compile"]> | undefined;

function validate(data: unknown): readonly ErrorObject[] {
  if (validator === undefined) {
    const ajv = new Ajv2020({ allErrors: true, verbose: true, useDefaults: true, strict: true, allowUnionTypes: true });
    for (const [name, format] of Object.entries(SYNTAX_FORMATS)) ajv.addFormat(name, { type: "string", validate: format.test });
    // Known to ajv but not checked by it (`true`): the checks parse these values, once, and report a failure.
    for (const name of Object.keys(PARSED_FORMATS)) ajv.addFormat(name, true);
    validator = ajv.compile(CONFIG_SCHEMA);
  }
  return validator(data) ? [] : (validator.errors ?? []);
}

/**
 * Parses and validates a configuration file's text. `env` and the files the text names supply the power
 * controls' secrets. Reads nothing else; throws ConfigError listing every problem found.
 */
export function loadConfig(yamlText: string, env: Readonly<Record<string, string | undefined>>): AppConfig {
  const { doc, data } = parseYaml(yamlText);
  if (data === null || data === undefined) {
    throw new ConfigError(["(top level): the configuration is empty; providerIDPrefix and nodeGroups are required"]);
  }
  // A failed `propertyNames` is also reported by the error inside it, which names the key.
  const schemaErrors = validate(data).filter((e) => e.keyword !== "propertyNames");
  const checked = checkConfig(data, schemaErrors.map((e) => e.instancePath), env);
  const fileIssues: ConfigIssue[] = [...schemaErrors.map((e) => describeSchemaError(e, data)), ...checked.issues];
  // Issues of the environment (a path not in the file) come last.
  const issues = fileIssues
    .map((issue) => ({ issue, position: positionOf(doc, issue.path) }))
    .sort((a, b) => a.position - b.position)
    .map(({ issue }) => `${formatPath(issue.path)}: ${issue.message}`);
  if (issues.length > 0) throw new ConfigError([...new Set(issues)]);
  // Each value that did not parse was reported (by the schema, the checks or the file reads), so none is missing.
  if (checked.parsed === undefined) throw new Error("configuration has no issue, yet a value did not parse");
  return deepFreeze(buildConfig(checked.parsed));
}

/** Reads and loads a configuration file (once, at start-up); an unreadable file is a ConfigError naming the path. */
export function loadConfigFile(path: string, env: Readonly<Record<string, string | undefined>>): AppConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError([`${path}: cannot read the configuration file (${whyUnreadable(error)})`]);
  }
  return loadConfig(text, env);
}

function parseYaml(text: string): { doc: Document; data: unknown } {
  const lineCounter = new LineCounter();
  // prettyErrors off: the pretty form quotes the offending source line, which may hold a credential.
  // logLevel "error": yaml would otherwise print its warnings (e.g. about odd keys) straight to the process.
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, logLevel: "error" });
  const at = (offset: number): string => {
    const { line, col } = lineCounter.linePos(offset);
    return `line ${line}, column ${col}`;
  };
  if (doc.errors.length > 0) {
    // By code, not message: yaml's messages may quote the source (`Block scalar header includes extra
    // characters: |hunter2`), and a credential with it. The codes: https://eemeli.org/yaml/#errors
    throw new ConfigError(doc.errors.map((e) => `${at(e.pos[0])}: YAML syntax error: ${YAML_FAULTS[e.code]} (${e.code})`));
  }
  try {
    return { doc, data: doc.toJS() };
  } catch (error) {
    // An alias without an anchor before it; yaml's message names the alias, which is source text.
    const alias = unresolvedAlias(doc);
    if (alias !== undefined) throw new ConfigError([`${at(alias)}: YAML error: an alias (*name) names no anchor (&name) set before it`]);
    // Else an alias bomb: yaml caps how far aliases expand, and says so in words of its own.
    throw new ConfigError([`(top level): cannot read the YAML: ${messageOf(error)}`]);
  }
}

/** Each of yaml's error codes in words of plugpool's own, which quote nothing from the file. */
const YAML_FAULTS: Readonly<Record<ErrorCode, string>> = {
  ALIAS_PROPS: "an alias (*name) cannot carry a tag or an anchor",
  BAD_ALIAS: "an alias (*name) that is not well formed",
  BAD_DIRECTIVE: "a %-directive yaml does not know",
  BAD_DQ_ESCAPE: "a backslash escape a double-quoted string does not allow",
  BAD_INDENT: "indentation that does not line up",
  BAD_PROP_ORDER: "an anchor or a tag in the wrong place",
  BAD_SCALAR_START: "a value that starts with a character reserved by YAML (quote the value)",
  BLOCK_AS_IMPLICIT_KEY: "a mapping where a single value belongs (check the indentation, or quote a value holding \": \")",
  BLOCK_IN_FLOW: "a block value inside [ ] or { }",
  DUPLICATE_KEY: "a key given twice in one mapping",
  IMPOSSIBLE: "a document yaml cannot read",
  KEY_OVER_1024_CHARS: "a key longer than 1024 characters",
  MISSING_CHAR: "a closing character missing (a quote, ] or })",
  MULTILINE_IMPLICIT_KEY: "a key that runs over more than one line (check the indentation and the quotes)",
  MULTIPLE_ANCHORS: "two anchors on one value",
  MULTIPLE_DOCS: "more than one YAML document (the file must hold a single one)",
  MULTIPLE_TAGS: "two tags on one value",
  NON_STRING_KEY: "a key that is not a string",
  RESOURCE_EXHAUSTION: "aliases that expand too far",
  TAB_AS_INDENT: "a tab used for indentation (use spaces)",
  TAG_RESOLVE_FAILED: "a tagged value that does not match its tag",
  UNEXPECTED_TOKEN: "a character that does not belong there (quote the value)",
  BAD_COLLECTION_TYPE: "a collection of the wrong kind for its tag",
};

/** Where the first alias is that no anchor before it resolves, if any. */
function unresolvedAlias(doc: Document): number | undefined {
  let offset: number | undefined;
  visit(doc, {
    Alias(_, alias) {
      if (alias.resolve(doc) !== undefined) return undefined;
      offset = alias.range?.[0] ?? 0;
      return visit.BREAK;
    },
  });
  return offset;
}

/**
 * Where in the file a path is (or its nearest ancestor, for a missing key), so issues come in file order; a path
 * of which nothing is in the file (an environment variable) comes after all of them.
 */
function positionOf(doc: Document, path: ConfigPath): number {
  for (let length = path.length; length > 0; length--) {
    const node = doc.getIn(path.slice(0, length), true);
    if (isNode(node) && node.range) return node.range[0];
  }
  return path.length === 0 ? 0 : Number.POSITIVE_INFINITY;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    // A Map's entries are no properties: its values (the power controls' addresses) are frozen one by one.
    for (const child of value instanceof Map ? value.values() : Object.values(value)) deepFreeze(child);
  }
  return value;
}
