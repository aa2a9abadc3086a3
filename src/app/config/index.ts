// Loads plugpool's configuration: YAML → JSON Schema (schema.json: the shape, defaults applied) → one pass that
// parses each value and checks what the schema cannot → typed, deeply frozen AppConfig. Every problem is
// reported at once, by path, in file order.
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject } from "ajv/dist/2020.js";
import { isNode, LineCounter, parseDocument, type Document } from "yaml";
import type { AppConfig } from "./app-config.ts";
import { buildConfig } from "./build.ts";
import { checkConfig } from "./checks.ts";
import { PARSED_FORMATS, SYNTAX_FORMATS } from "./formats.ts";
import { describeSchemaError, formatPath, type ConfigIssue, type ConfigPath } from "./issues.ts";
import schema from "./schema.json" with { type: "json" };
import { readCredentialFiles, whyUnreadable } from "./plug-credentials.ts";
import { Secret } from "./secret.ts";
import { messageOf } from "../../domain/errors.ts";

export type { AppConfig, PlugCredentials } from "./app-config.ts";

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

const USERNAME_VARIABLE = "PLUGPOOL_PLUG_USERNAME";
const PASSWORD_VARIABLE = "PLUGPOOL_PLUG_PASSWORD";

let validator: ReturnType<Ajv2020["compile"]> | undefined;

function validate(data: unknown): readonly ErrorObject[] {
  if (validator === undefined) {
    const ajv = new Ajv2020({ allErrors: true, verbose: true, useDefaults: true, strict: true, allowUnionTypes: true });
    for (const [name, format] of Object.entries(SYNTAX_FORMATS)) ajv.addFormat(name, { type: "string", validate: format.test });
    // Known to ajv but not checked by it (`true`): the checks parse these values, once, and report a failure.
    for (const name of Object.keys(PARSED_FORMATS)) ajv.addFormat(name, true);
    validator = ajv.compile(schema);
  }
  return validator(data) ? [] : (validator.errors ?? []);
}

/**
 * Parses and validates a configuration file's text. `env` supplies the shared plug credentials, files named in
 * the text a plug's own. Reads nothing else; throws ConfigError listing every problem found.
 */
export function loadConfig(yamlText: string, env: Readonly<Record<string, string | undefined>>): AppConfig {
  const { doc, data } = parseYaml(yamlText);
  if (data === null || data === undefined) {
    throw new ConfigError(["(top level): the configuration is empty; providerIDPrefix and nodeGroups are required"]);
  }
  // A failed `propertyNames` is also reported by the error inside it, which names the key.
  const schemaErrors = validate(data).filter((e) => e.keyword !== "propertyNames");
  const credentialFiles = readCredentialFiles(data);
  const checked = checkConfig(data, schemaErrors.map((e) => e.instancePath), credentialFiles.values);
  const fileIssues: ConfigIssue[] = [
    ...schemaErrors.map((e) => describeSchemaError(e, data)),
    ...checked.issues,
    ...credentialFiles.issues,
  ];
  const { credentials, issues: credentialIssues } = readCredentials(env);
  const issues = [
    ...fileIssues
      .map((issue) => ({ issue, position: positionOf(doc, issue.path) }))
      .sort((a, b) => a.position - b.position)
      .map(({ issue }) => `${formatPath(issue.path)}: ${issue.message}`),
    ...credentialIssues,
  ];
  if (issues.length > 0) throw new ConfigError([...new Set(issues)]);
  // Each value that did not parse was reported (by the schema, the checks or the file reads), so none is missing.
  if (checked.parsed === undefined) throw new Error("configuration has no issue, yet a value did not parse");
  return deepFreeze(buildConfig(checked.parsed, credentials));
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
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        const what = e.code === "MULTIPLE_DOCS" ? "the file must hold a single YAML document" : e.message.split("\n")[0];
        return `line ${line}, column ${col}: YAML syntax error: ${what ?? ""}`;
      }),
    );
  }
  try {
    return { doc, data: doc.toJS() };
  } catch (error) {
    // Only alias bombs get here (yaml caps how far aliases expand).
    throw new ConfigError([`(top level): cannot read the YAML: ${messageOf(error)}`]);
  }
}

/** Where in the file a path is (or its nearest ancestor, for a missing key), so issues come in file order. */
function positionOf(doc: Document, path: ConfigPath): number {
  for (let length = path.length; length > 0; length--) {
    const node = doc.getIn(path.slice(0, length), true);
    if (isNode(node) && node.range) return node.range[0];
  }
  return 0;
}

function readCredentials(env: Readonly<Record<string, string | undefined>>): {
  credentials?: AppConfig["credentials"];
  issues: string[];
} {
  // An empty variable counts as unset: `env:` entries in a manifest often default to "".
  const username = env[USERNAME_VARIABLE] === "" ? undefined : env[USERNAME_VARIABLE];
  const password = env[PASSWORD_VARIABLE] === "" ? undefined : env[PASSWORD_VARIABLE];
  if (username === undefined && password === undefined) return { issues: [] };
  if (username !== undefined && password !== undefined) {
    return { credentials: { username: new Secret(username), password: new Secret(password) }, issues: [] };
  }
  // Names the variables only: their values never go into a message.
  const [missing, set] = username === undefined ? [USERNAME_VARIABLE, PASSWORD_VARIABLE] : [PASSWORD_VARIABLE, USERNAME_VARIABLE];
  return { issues: [`${missing}: is not set but ${set} is; plug credentials need both variables, or neither`] };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
