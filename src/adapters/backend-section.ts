// What the backends' sections share when they are parsed: the device URL, reported at `url` when refused;
// credentials from files or from a pair of environment variables; and the rule that every control on one device
// reaches it the same way (one login, one certificate).
import type { DeviceUrl } from "./device-url.ts";
import { formatPath, type ParsedControl, type ReportIssue, type SectionContext, type SectionPath } from "./power-backend.ts";
import { Secret } from "./secret.ts";

/** A username and password, never shown. */
export interface SecretCredentials {
  readonly username: Secret;
  readonly password: Secret;
  /** Where they were read: FROM_ENVIRONMENT, or the two files' paths (never a value). */
  readonly from: string;
}

/** `from` of credentials read from the environment. */
export const FROM_ENVIRONMENT = "environment";

type Env = SectionContext["env"];

/** The section's checked URL; undefined when it was refused (reported at `url`). */
export function sectionUrl(checked: DeviceUrl, context: SectionContext): { readonly url: string; readonly device: string } | undefined {
  if (checked.ok) return checked;
  context.report([...context.path, "url"], checked.expected);
  return undefined;
}

/** An environment variable's value; an empty one counts as unset: `env:` entries in a manifest often default to "". */
export function envValue(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === "" ? undefined : value;
}

/** The pair from two environment variables, when both are set (one alone is reported by `checkVariablePair`). */
export function credentialsFromEnvironment(env: Env, usernameVariable: string, passwordVariable: string): SecretCredentials | undefined {
  const username = envValue(env, usernameVariable);
  const password = envValue(env, passwordVariable);
  return username === undefined || password === undefined
    ? undefined
    : { username: new Secret(username), password: new Secret(password), from: FROM_ENVIRONMENT };
}

/** The pair from the files named at `at`; undefined when a file cannot be read (reported). */
export function credentialsFromFiles(
  files: { readonly usernameFile: string; readonly passwordFile: string },
  at: SectionPath,
  context: SectionContext,
): SecretCredentials | undefined {
  const username = context.secretFile(files.usernameFile, [...at, "usernameFile"]);
  const password = context.secretFile(files.passwordFile, [...at, "passwordFile"]);
  return username === undefined || password === undefined ? undefined : { username, password, from: `${files.usernameFile}, ${files.passwordFile}` };
}

/** Reports one variable of a username and password pair set without the other; `what` names the pair. */
export function checkVariablePair(env: Env, report: ReportIssue, usernameVariable: string, passwordVariable: string, what: string): void {
  const username = envValue(env, usernameVariable);
  const password = envValue(env, passwordVariable);
  if ((username === undefined) === (password === undefined)) return;
  // Names the variables only: their values never go into a message.
  const [missing, present] = username === undefined ? [usernameVariable, passwordVariable] : [passwordVariable, usernameVariable];
  report([missing], `is not set but ${present} is; ${what} need both variables, or neither`);
}

/**
 * Calls `differs` for every control whose `way` (how it reaches its device: credentials files, a CA, ...)
 * is not that of the first control on the same device, with the path of that first one.
 */
export function checkOneWayPerDevice<Address>(
  controls: readonly { readonly control: ParsedControl<Address>; readonly path: SectionPath }[],
  way: (address: Address) => string,
  differs: (path: SectionPath, first: string, device: string) => void,
): void {
  const first = new Map<string, { readonly way: string; readonly path: SectionPath }>();
  for (const { control, path } of controls) {
    const its = way(control.address);
    const seen = first.get(control.device);
    if (seen === undefined) first.set(control.device, { way: its, path });
    else if (seen.way !== its) differs(path, formatPath(seen.path), control.device);
  }
}
