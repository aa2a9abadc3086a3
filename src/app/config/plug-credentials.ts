// Plug credentials: one pair from the environment for every plug, and a plug's own pair from files (a mounted
// Kubernetes Secret) where its config names them. Files are read once, at start; their values are Secrets from
// the moment they are read, and no message ever holds one.
import { readFileSync } from "node:fs";
import type { Credentials } from "../../adapters/esphome/device-auth.ts";
import type { PlugAddress } from "../../domain/model.ts";
import type { AppConfig } from "./app-config.ts";
import { childOf, type ConfigIssue, type ConfigPath } from "./issues.ts";
import { Secret } from "./secret.ts";

/** The files of `nodeGroups[].nodes[].plug.credentials`, read: their values by path, and every file that could not be. */
export interface CredentialFiles {
  readonly values: ReadonlyMap<string, Secret>;
  readonly issues: readonly ConfigIssue[];
}

/** Why a file could not be read, in a few words (never its content). */
export function whyUnreadable(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "is a directory";
  return String(code ?? error);
}

/** Reads every credentials file the parsed configuration names (whatever else is wrong with it). */
export function readCredentialFiles(root: unknown): CredentialFiles {
  const values = new Map<string, Secret>();
  const issues: ConfigIssue[] = [];
  const list = (node: unknown): readonly unknown[] => (Array.isArray(node) ? node : []);
  list(childOf(root, "nodeGroups")).forEach((group, g) => {
    list(childOf(group, "nodes")).forEach((node, n) => {
      const credentials = childOf(childOf(node, "plug"), "credentials");
      for (const key of ["usernameFile", "passwordFile"]) {
        const path = childOf(credentials, key);
        if (typeof path !== "string" || path === "" || values.has(path)) continue;
        const at: ConfigPath = ["nodeGroups", g, "nodes", n, "plug", "credentials", key];
        try {
          // A Secret's files usually end in a newline that is no part of the value.
          values.set(path, new Secret(readFileSync(path, "utf8").replace(/\r?\n$/u, "")));
        } catch (error) {
          issues.push({ path: at, message: `cannot read ${path} (${whyUnreadable(error)})` });
        }
      }
    });
  });
  return { values, issues };
}

/** The credentials each plug's device is sent once it asks for them: its own, else the shared pair, else none. */
export function plugCredentialsFor(config: AppConfig): (plug: PlugAddress) => Credentials | undefined {
  return (plug) => {
    const pair = config.plugCredentials.get(plug.device) ?? config.credentials;
    return pair && { username: pair.username.reveal(), password: pair.password.reveal() };
  };
}
